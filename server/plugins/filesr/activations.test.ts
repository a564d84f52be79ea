import { test } from "node:test";
import assert from "node:assert/strict";
import { clearActivation, listActivations, recordActivation } from "./activations.ts";
import { createVolume, snapshotVolume } from "./volumes.ts";
import { FileSrError } from "./errors.ts";
import { makeSr } from "./test-support.ts";

function rejectsWith(kind: string, params?: string[]) {
  return (error: unknown) => {
    assert.ok(error instanceof FileSrError, `expected FileSrError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    if (params) assert.deepEqual(error.params, params);
    return true;
  };
}

test("a read-write activation is exclusive across hosts and idempotent for the same host and domain", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 1 });
  await recordActivation(sr, key, { host: "host-a", domain: "vm1", mode: "rw" });
  await recordActivation(sr, key, { host: "host-a", domain: "vm1", mode: "rw" });
  assert.deepEqual(await listActivations(sr, key), [{ host: "host-a", domain: "vm1", mode: "rw" }]);
  await assert.rejects(recordActivation(sr, key, { host: "host-b", domain: "vm1", mode: "rw" }), rejectsWith("Activated_on_another_host", ["host-a"]));
  await assert.rejects(recordActivation(sr, key, { host: "host-b", domain: "vm9", mode: "ro" }), rejectsWith("Activated_on_another_host", ["host-a"]));
  await assert.rejects(recordActivation(sr, key, { host: "host-a", domain: "vm1", mode: "ro" }), rejectsWith("Invalid"));
  // Snapshots are taken on the active host only.
  await assert.rejects(snapshotVolume(sr, key, { host: "host-b" }), rejectsWith("Activated_on_another_host", ["host-a"]));
  await snapshotVolume(sr, key, { host: "host-a" });
  // Same host, another domain (local migration) is allowed.
  await recordActivation(sr, key, { host: "host-a", domain: "vm2", mode: "rw" });
  await clearActivation(sr, key, { host: "host-a", domain: "vm1" });
  await clearActivation(sr, key, { host: "host-a", domain: "vm1" });
  await clearActivation(sr, key, { host: "host-a", domain: "vm2" });
  await recordActivation(sr, key, { host: "host-b", domain: "vm1", mode: "rw" });
  assert.deepEqual(await listActivations(sr, key), [{ host: "host-b", domain: "vm1", mode: "rw" }]);
});

test("read-only activations may be many, but never alongside a read-write one", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 1 });
  await recordActivation(sr, key, { host: "host-a", domain: "1", mode: "ro" });
  await recordActivation(sr, key, { host: "host-b", domain: "1", mode: "ro" });
  await recordActivation(sr, key, { host: "host-b", domain: "1", mode: "ro" });
  assert.equal((await listActivations(sr, key)).length, 2);
  await assert.rejects(recordActivation(sr, key, { host: "host-a", domain: "2", mode: "rw" }), rejectsWith("Invalid"));
  await clearActivation(sr, key, { host: "host-a", domain: "1" });
  await clearActivation(sr, key, { host: "host-b", domain: "1" });
  await recordActivation(sr, key, { host: "host-a", domain: "2", mode: "rw" });
  await assert.rejects(recordActivation(sr, key, { host: "host-a", domain: "3", mode: "ro" }), rejectsWith("Invalid"));
});

test("activation calls check their arguments", async (t) => {
  const sr = await makeSr(t);
  await assert.rejects(recordActivation(sr, "missing", { host: "h", domain: "d", mode: "rw" }), rejectsWith("Volume_does_not_exist"));
  await assert.rejects(recordActivation(sr, "../x", { host: "h", domain: "d", mode: "rw" }), rejectsWith("Invalid"));
  await assert.rejects(clearActivation(sr, "../x", { host: "h", domain: "d" }), rejectsWith("Invalid"));
  const { key } = await createVolume(sr, { name: "v", description: "", size: 1 });
  await assert.rejects(recordActivation(sr, key, { host: "h", domain: "d", mode: "wr" as "rw" }), rejectsWith("Invalid"));
  await clearActivation(sr, "missing", { host: "h", domain: "d" });
});
