// The sealed cookie says who logged in, not that the session still holds: a procedure that never asks the
// toolstack (the plugin list, a plugin's diagnostics, conformance runs, the user's uploads) must refuse the
// cookie of a session logged out since, as every other one does. Found by the console fuzz
// (e2e/console.fuzz.spec.ts): plugins.list, plugins.diagnostics, conformance.runs and transfers.uploads
// answered such a cookie with their data.
import assert from "node:assert/strict";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { logIn, logOut, SESSION_COOKIE } from "../auth/session.ts";
import { ROOT_PASSWORD } from "../toolstack/testing.ts";
import { createCaller } from "./root.ts";
import { startConsoleUnderTest } from "./testing.ts";
import { createTRPCContext } from "./trpc.ts";

test("a session logged out since is UNAUTHORIZED everywhere, even where the toolstack is not asked", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const other = await logIn("root", ROOT_PASSWORD);
  const caller = createCaller(createTRPCContext({ headers: new Headers({ cookie: `${SESSION_COOKIE}=${other.cookie}` }) }));
  const plugin = (await caller.plugins.list()).plugins.find((p) => p.kind === "volume")!;
  await logOut(other.session);

  const calls: [string, () => Promise<unknown>][] = [
    ["plugins.list", () => caller.plugins.list()],
    ["plugins.diagnostics", () => caller.plugins.diagnostics({ name: plugin.dir })],
    ["conformance.runs", () => caller.conformance.runs({})],
    ["transfers.uploads", () => caller.transfers.uploads()],
    ["transfers.cancel", () => caller.transfers.cancel({ id: "f022" })],
    ["srs.list", () => caller.srs.list()],
  ];
  for (const [name, call] of calls) {
    await assert.rejects(call(), (error: unknown) => {
      assert.ok(error instanceof TRPCError, `${name}: ${String(error)}`);
      assert.equal(error.code, "UNAUTHORIZED", `${name}: ${error.code} ${error.message}`);
      return true;
    });
  }
  // The live session is not affected.
  assert.ok((await cu.caller.plugins.list()).plugins.length > 0);
});
