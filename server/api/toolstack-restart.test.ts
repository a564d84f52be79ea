// The console while its toolstack restarts: calls made meanwhile fail with words that say so (never an
// internal error), and the same login works again once the toolstack is back (its sessions are stored).
import assert from "node:assert/strict";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { startConsoleUnderTest } from "./testing.ts";

test("a toolstack that restarts: SERVICE_UNAVAILABLE in words meanwhile, the same session afterwards", async (t) => {
  const { caller, toolstack } = await startConsoleUnderTest(t);
  const before = await caller.srs.list();
  assert.ok(before.srs.length >= 1);

  let during: unknown;
  await toolstack.restart(async () => {
    during = await caller.srs.list().then(
      () => undefined,
      (error: unknown) => error,
    );
  });
  assert.ok(during instanceof TRPCError, `expected a TRPCError, got ${String(during)}`);
  assert.equal(during.code, "SERVICE_UNAVAILABLE");
  assert.match(during.message, /cannot reach the toolstack at http:\/\/127\.0\.0\.1:\d+.*Is the toolstack running\?/);

  // The restarted service listens on a new port here; the console follows HANGAR_TOOLSTACK_URL.
  process.env.HANGAR_TOOLSTACK_URL = `http://127.0.0.1:${toolstack.service.httpPort}`;
  const after = await caller.srs.list();
  assert.deepEqual(
    after.srs.map((sr) => sr.uuid),
    before.srs.map((sr) => sr.uuid),
  );
});
