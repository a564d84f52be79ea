// datasources.series against a real toolstack: the default file SR's plugin writes its datasource file
// (SR.attach starts the daemon), the console samples it and answers the range with units.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { consoleSampler } from "../../datasources/console-sampler.ts";
import { startConsoleUnderTest } from "../testing.ts";

test("datasources.series: the default SR's samples, rates after the second, units; refusals in words", async (t) => {
  const { caller, anonymous, xapi } = await startConsoleUnderTest(t);
  t.after(() => consoleSampler().stop());
  const pool = (await xapi.call(z.array(z.string()), "pool.get_all"))[0]!;
  const sr = await xapi.call(z.string(), "pool.get_default_SR", pool);

  const first = await caller.datasources.series({ srRef: sr, rangeSeconds: 300 });
  assert.equal(first.error, null);
  assert.equal(first.intervalSeconds, 5);
  assert.ok(first.t.length >= 1, "the first request has its first sample");
  const units = Object.fromEntries(first.datasources.map((d) => [d.name, d.units]));
  assert.deepEqual(
    [units.free_space, units.io_read_bytes, units.io_write_bytes, units.iops_read, units.read_latency],
    ["B", "B/s", "B/s", "requests/s", "ms"],
  );
  assert.ok(first.values.free_space![0]! > 0);

  // The daemon and the sampler both run every 5 s: within ~11 s a second sample brings rates.
  let later = first;
  for (let i = 0; i < 24 && later.t.length < 2; i++) {
    await sleep(500);
    later = await caller.datasources.series({ srRef: sr, rangeSeconds: 300 });
  }
  assert.ok(later.t.length >= 2, "a second sample within ~11 s");
  assert.equal(later.values.io_read_bytes!.at(-1), 0, "no I/O: 0 B/s");
  assert.ok(later.t.at(-1)! > later.t[0]!);

  await assert.rejects(caller.datasources.series({ srRef: "OpaqueRef:nope", rangeSeconds: 300 }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "NOT_FOUND");
    return true;
  });
  await assert.rejects(caller.datasources.series({ srRef: sr, rangeSeconds: 42 as 300 }), (error: unknown) => error instanceof TRPCError && error.code === "BAD_REQUEST");
  await assert.rejects(anonymous.datasources.series({ srRef: sr, rangeSeconds: 300 }), (error: unknown) => error instanceof TRPCError && error.code === "UNAUTHORIZED");

  // Detached: refused in words (the user's session says so), the sampler's history aside.
  const pbd = (await xapi.call(z.array(z.string()), "SR.get_PBDs", sr))[0]!;
  await xapi.call(z.unknown(), "PBD.unplug", pbd);
  await assert.rejects(caller.datasources.series({ srRef: sr, rangeSeconds: 300 }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "PRECONDITION_FAILED");
    assert.match(error.message, /detached/);
    return true;
  });
});
