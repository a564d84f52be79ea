// The console fuzz (e2e/console.fuzz.spec.ts) calls every procedure of the root router from a list of its own
// (the spec cannot import the router): that list must be the router's, kinds included.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CONSOLE_PROCEDURES } from "../../e2e/console-fuzz-procedures.ts";
import { appRouter } from "./root.ts";

test("the console fuzz's list of procedures is the root router's", () => {
  const procedures = (appRouter._def as unknown as { procedures: Record<string, { _def: { type: string } }> }).procedures;
  const actual = Object.fromEntries(Object.entries(procedures).map(([path, procedure]) => [path, procedure._def.type]));
  assert.deepEqual(actual, CONSOLE_PROCEDURES);
});
