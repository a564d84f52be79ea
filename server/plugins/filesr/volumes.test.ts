import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { performance } from "node:perf_hooks";
import {
  cloneVolume,
  createVolume,
  destroyVolume,
  findSimilarVolumes,
  listVolumes,
  resizeVolume,
  revertVolume,
  setVolumeDescription,
  setVolumeKey,
  setVolumeName,
  snapshotVolume,
  statVolume,
  unsetVolumeKey,
} from "./volumes.ts";
import { compareVolumes } from "./compare.ts";
import { copyVolume } from "./copy.ts";
import { recordActivation } from "./activations.ts";
import { openVolumeData } from "./volume-data.ts";
import { readSrIo } from "./stats.ts";
import { FileSrError } from "./errors.ts";
import { CLUSTER_SIZE, srFiles } from "./layout.ts";
import { checkConsistency, hashVolume, makeSr, pattern, readAt, writeAt } from "./test-support.ts";

const MiB = 1024 * 1024;

function rejectsWith(kind: string, code?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof FileSrError, `expected FileSrError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    if (code) assert.equal(error.code, code, error.message);
    return true;
  };
}

test("createVolume rounds the size up to the cluster and reports every volume field", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "disk", description: "root disk", size: 100_000, sharable: true });
  assert.equal(volume.virtual_size, 2 * CLUSTER_SIZE);
  assert.equal(volume.key, volume.uuid);
  assert.deepEqual(
    { ...volume, key: "", uuid: "" },
    {
      key: "",
      uuid: "",
      name: "disk",
      description: "root disk",
      read_write: true,
      sharable: true,
      virtual_size: 2 * CLUSTER_SIZE,
      physical_utilisation: 0,
      keys: {},
      volume_type: "Data",
      cbt_enabled: false,
    },
  );
  assert.deepEqual(await statVolume(sr, volume.key), volume);
  assert.deepEqual(await listVolumes(sr), [volume]);
  await assert.rejects(createVolume(sr, { name: "x", description: "", size: -1 }), rejectsWith("Invalid", "bad_size"));
  await assert.rejects(createVolume(sr, { name: "x", description: "", size: 2 ** 60 }), rejectsWith("Invalid", "bad_size"));
});

test("keys are validated: no path escapes, missing volumes are Volume_does_not_exist", async (t) => {
  const sr = await makeSr(t);
  for (const bad of ["../../etc/passwd", "/abs", "a/b", "..", ".hidden", "", "a\u0000b", "x".repeat(300), "a..b"]) {
    await assert.rejects(statVolume(sr, bad), rejectsWith("Invalid", "bad_key"), bad);
    await assert.rejects(destroyVolume(sr, bad), rejectsWith("Invalid", "bad_key"), bad);
    await assert.rejects(openVolumeData(sr, bad), rejectsWith("Invalid", "bad_key"), bad);
  }
  await assert.rejects(statVolume(sr, "no-such-volume"), rejectsWith("Volume_does_not_exist"));
  await assert.rejects(snapshotVolume(sr, "no-such-volume"), rejectsWith("Volume_does_not_exist"));
  await assert.rejects(setVolumeKey(sr, "no-such-volume", "k", "v"), rejectsWith("Volume_does_not_exist"));
});

test("metadata pairs, names and descriptions are stored byte for byte", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const values: Record<string, string> = {
    "vdi-type": "user",
    snapshot_time: "2024-05-01T10:00:00Z",
    "_sm_config_weird": "quote\" back\\slash\nnewline\ttab",
    "nul\u0000key": "nul\u0000value",
    "emoji 🚀": "ünïcødé ✓ 💾",
    empty: "",
  };
  for (const [k, v] of Object.entries(values)) await setVolumeKey(sr, key, k, v);
  await setVolumeKey(sr, key, "vdi-type", "system");
  await unsetVolumeKey(sr, key, "empty");
  await unsetVolumeKey(sr, key, "never-set");
  await setVolumeName(sr, key, "名前");
  await setVolumeDescription(sr, key, "desc\r\n");
  const expected = { ...values, "vdi-type": "system" } as Record<string, string>;
  delete expected.empty;
  const volume = await statVolume(sr, key);
  assert.deepEqual(volume.keys, expected);
  assert.equal(volume.name, "名前");
  assert.equal(volume.description, "desc\r\n");
  await assert.rejects(setVolumeKey(sr, key, "k", "\udc00"), rejectsWith("Invalid", "bad_text"));
});

test("snapshot is read-only, copies name and description but not keys, and is isolated from later writes", async (t) => {
  const sr = await makeSr(t);
  const base = await createVolume(sr, { name: "db", description: "database", size: 4 * MiB });
  await setVolumeKey(sr, base.key, "vdi-type", "user");
  const before = pattern(1, 2 * MiB);
  await writeAt(sr, base.key, 0, before);
  const snap = await snapshotVolume(sr, base.key);
  assert.equal(snap.read_write, false);
  assert.equal(snap.name, "db");
  assert.equal(snap.description, "database");
  assert.deepEqual(snap.keys, {});
  assert.equal(snap.virtual_size, base.virtual_size);
  assert.notEqual(snap.key, base.key);
  // Writes after the snapshot change the volume, not the snapshot (including a partial-cluster write).
  await writeAt(sr, base.key, 1000, pattern(2, 5000));
  await writeAt(sr, base.key, MiB, pattern(3, MiB));
  assert.deepEqual(await readAt(sr, snap.key, 0, 2 * MiB), before);
  const now = await readAt(sr, base.key, 0, 2 * MiB);
  const expected = Buffer.from(before);
  pattern(2, 5000).copy(expected, 1000);
  pattern(3, MiB).copy(expected, MiB);
  assert.deepEqual(now, expected);
  await assert.rejects(openVolumeData(sr, snap.key), rejectsWith("Invalid", "read_only_volume"));
  await assert.rejects(resizeVolume(sr, snap.key, 8 * MiB), rejectsWith("Invalid", "read_only_volume"));
});

test("clone is writable and independent of its origin in both directions", async (t) => {
  const sr = await makeSr(t);
  const origin = await createVolume(sr, { name: "golden", description: "template", size: 2 * MiB });
  const content = pattern(10, 2 * MiB);
  await writeAt(sr, origin.key, 0, content);
  const clone = await cloneVolume(sr, origin.key);
  assert.equal(clone.read_write, true);
  assert.equal(clone.name, "golden");
  assert.deepEqual(await readAt(sr, clone.key, 0, 2 * MiB), content);
  await writeAt(sr, clone.key, 0, pattern(11, 100));
  await writeAt(sr, origin.key, MiB, pattern(12, 100));
  const cloneNow = await readAt(sr, clone.key, 0, 2 * MiB);
  const originNow = await readAt(sr, origin.key, 0, 2 * MiB);
  assert.deepEqual(cloneNow.subarray(0, 100), pattern(11, 100));
  assert.deepEqual(cloneNow.subarray(MiB, MiB + 100), content.subarray(MiB, MiB + 100));
  assert.deepEqual(originNow.subarray(0, 100), content.subarray(0, 100));
  assert.deepEqual(originNow.subarray(MiB, MiB + 100), pattern(12, 100));
  // A clone of a snapshot works too, without touching the snapshot.
  const snap = await snapshotVolume(sr, origin.key);
  const fromSnap = await cloneVolume(sr, snap.key);
  await writeAt(sr, fromSnap.key, 0, pattern(13, 10));
  assert.deepEqual((await readAt(sr, snap.key, 0, 10)), originNow.subarray(0, 10));
});

test("snapshot and clone cost O(metadata): no data is copied", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "big", description: "", size: 64 * MiB });
  await writeAt(sr, volume.key, 0, pattern(1, 32 * MiB));
  const before = fs.readdirSync(srFiles(sr).layers).length;
  const started = performance.now();
  await snapshotVolume(sr, volume.key);
  await cloneVolume(sr, volume.key);
  const elapsed = performance.now() - started;
  assert.ok(elapsed < 500, `snapshot + clone took ${elapsed} ms`);
  // Three new empty layers (the volume's fresh top after each, the clone's top): 2 files each.
  assert.equal(fs.readdirSync(srFiles(sr).layers).length, before + 6);
});

test("revert gives the volume the snapshot's content and size and keeps its identity", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "v", description: "", size: 2 * MiB });
  await setVolumeKey(sr, volume.key, "keep", "me");
  const original = pattern(20, 2 * MiB);
  await writeAt(sr, volume.key, 0, original);
  const snap = await snapshotVolume(sr, volume.key);
  await writeAt(sr, volume.key, 0, pattern(21, MiB));
  await resizeVolume(sr, volume.key, 4 * MiB);
  await revertVolume(sr, snap.key, volume.key);
  const after = await statVolume(sr, volume.key);
  assert.equal(after.uuid, volume.uuid);
  assert.equal(after.virtual_size, 2 * MiB);
  assert.deepEqual(after.keys, { keep: "me" });
  assert.deepEqual(await readAt(sr, volume.key, 0, 2 * MiB), original);
  // Reverting again after more writes works, and the snapshot is untouched.
  await writeAt(sr, volume.key, 0, pattern(22, 10));
  await revertVolume(sr, snap.key, volume.key);
  assert.deepEqual(await readAt(sr, volume.key, 0, 2 * MiB), original);
  await assert.rejects(revertVolume(sr, volume.key, snap.key), rejectsWith("Invalid", "not_a_snapshot"));
  await recordActivation(sr, volume.key, { host: "h1", domain: "d1", mode: "rw" });
  await assert.rejects(revertVolume(sr, snap.key, volume.key), rejectsWith("Invalid", "volume_in_use"));
  assert.deepEqual(checkConsistency(sr), []);
});

test("resize grows (new space reads as zeros) and refuses to shrink", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "v", description: "", size: MiB });
  await writeAt(sr, volume.key, 0, pattern(30, MiB));
  await snapshotVolume(sr, volume.key);
  await resizeVolume(sr, volume.key, 3 * MiB + 1);
  const grown = await statVolume(sr, volume.key);
  assert.equal(grown.virtual_size, 3 * MiB + CLUSTER_SIZE);
  const data = await readAt(sr, volume.key, 0, grown.virtual_size);
  assert.deepEqual(data.subarray(0, MiB), pattern(30, MiB));
  assert.ok(data.subarray(MiB).every((byte) => byte === 0));
  await writeAt(sr, volume.key, 3 * MiB, pattern(31, CLUSTER_SIZE));
  assert.deepEqual(await readAt(sr, volume.key, 3 * MiB, CLUSTER_SIZE), pattern(31, CLUSTER_SIZE));
  await resizeVolume(sr, volume.key, grown.virtual_size);
  await assert.rejects(resizeVolume(sr, volume.key, MiB), rejectsWith("Invalid", "shrink"));
  const open = await openVolumeData(sr, volume.key);
  await assert.rejects(resizeVolume(sr, volume.key, 8 * MiB), rejectsWith("Invalid", "volume_in_use"));
  await open.close();
});

test("destroy frees the volume's own layers at once and refuses volumes in use", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "v", description: "", size: MiB });
  await writeAt(sr, volume.key, 0, pattern(40, MiB));
  const clone = await cloneVolume(sr, volume.key);
  const files = () => fs.readdirSync(srFiles(sr).layers).length;
  const withClone = files();
  await destroyVolume(sr, clone.key);
  assert.equal(files(), withClone - 2);
  await assert.rejects(statVolume(sr, clone.key), rejectsWith("Volume_does_not_exist"));
  await assert.rejects(destroyVolume(sr, clone.key), rejectsWith("Volume_does_not_exist"));
  await recordActivation(sr, volume.key, { host: "h", domain: "d", mode: "ro" });
  await assert.rejects(destroyVolume(sr, volume.key), rejectsWith("Invalid", "volume_in_use"));
  const other = await createVolume(sr, { name: "o", description: "", size: MiB });
  const open = await openVolumeData(sr, other.key, { readOnly: true });
  await assert.rejects(destroyVolume(sr, other.key), rejectsWith("Invalid", "volume_in_use"));
  await open.close();
  await destroyVolume(sr, other.key);
});

test("physical_utilisation counts allocated clusters of the chain", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "v", description: "", size: 8 * MiB });
  await writeAt(sr, volume.key, 0, pattern(1, MiB));
  await writeAt(sr, volume.key, 4 * MiB, pattern(1, 10));
  assert.equal((await statVolume(sr, volume.key)).physical_utilisation, MiB + CLUSTER_SIZE);
  const snap = await snapshotVolume(sr, volume.key);
  await writeAt(sr, volume.key, 2 * MiB, pattern(2, CLUSTER_SIZE));
  assert.equal((await statVolume(sr, snap.key)).physical_utilisation, MiB + CLUSTER_SIZE);
  assert.equal((await statVolume(sr, volume.key)).physical_utilisation, MiB + 2 * CLUSTER_SIZE);
});

test("compare lists differing blocks of related volumes, non-empty blocks otherwise", async (t) => {
  const sr = await makeSr(t);
  const volume = await createVolume(sr, { name: "v", description: "", size: 16 * CLUSTER_SIZE });
  await writeAt(sr, volume.key, 0, pattern(1, 4 * CLUSTER_SIZE));
  await writeAt(sr, volume.key, 10 * CLUSTER_SIZE, pattern(2, CLUSTER_SIZE));
  const snap = await snapshotVolume(sr, volume.key);
  await writeAt(sr, volume.key, 2 * CLUSTER_SIZE + 5, pattern(3, 7));
  await writeAt(sr, volume.key, 12 * CLUSTER_SIZE, pattern(4, 2 * CLUSTER_SIZE));
  assert.deepEqual(await compareVolumes(sr, volume.key, snap.key), { blocksize: CLUSTER_SIZE, ranges: [[2, 1], [12, 2]] });
  assert.deepEqual(await compareVolumes(sr, snap.key, volume.key), { blocksize: CLUSTER_SIZE, ranges: [[2, 1], [12, 2]] });
  assert.deepEqual(await compareVolumes(sr, volume.key, volume.key), { blocksize: CLUSTER_SIZE, ranges: [] });
  const clone = await cloneVolume(sr, snap.key);
  await writeAt(sr, clone.key, 15 * CLUSTER_SIZE, pattern(5, 1));
  assert.deepEqual((await compareVolumes(sr, volume.key, clone.key)).ranges, [[2, 1], [12, 2], [15, 1]]);
  const unrelated = await createVolume(sr, { name: "u", description: "", size: MiB });
  assert.deepEqual((await compareVolumes(sr, snap.key, unrelated.key)).ranges, [[0, 4], [10, 1]]);
  assert.deepEqual((await compareVolumes(sr, snap.key, "missing-volume")).ranges, [[0, 4], [10, 1]]);
  await assert.rejects(compareVolumes(sr, "missing-volume", snap.key), rejectsWith("Volume_does_not_exist"));
});

test("findSimilarVolumes returns the snapshot/clone lineage", async (t) => {
  const sr = await makeSr(t);
  const a = await createVolume(sr, { name: "a", description: "", size: MiB });
  const b = await createVolume(sr, { name: "b", description: "", size: MiB });
  const snap = await snapshotVolume(sr, a.key);
  const clone = await cloneVolume(sr, snap.key);
  assert.deepEqual((await findSimilarVolumes(sr, a.key)).sort(), [snap.key, clone.key].sort());
  assert.deepEqual((await findSimilarVolumes(sr, clone.key)).sort(), [a.key, snap.key].sort());
  assert.deepEqual(await findSimilarVolumes(sr, b.key), []);
});

test("copy makes a flat writable copy in another SR reading only allocated clusters", async (t) => {
  const sr = await makeSr(t);
  const dest = await makeSr(t, "destination");
  const volume = await createVolume(sr, { name: "src", description: "to copy", size: 64 * MiB });
  await writeAt(sr, volume.key, 0, pattern(50, MiB));
  const snap = await snapshotVolume(sr, volume.key);
  await writeAt(sr, volume.key, 32 * MiB + 123, pattern(51, 1000));
  await snapshotVolume(sr, volume.key);
  const before = readSrIo(sr).readBytes;
  const copy = await copyVolume(sr, volume.key, dest);
  const read = readSrIo(sr).readBytes - before;
  assert.equal(read, MiB + CLUSTER_SIZE, "only the allocated clusters are read");
  assert.equal(copy.read_write, true);
  assert.equal(copy.name, "src");
  assert.equal(copy.physical_utilisation, MiB + CLUSTER_SIZE);
  assert.equal(await hashVolume(dest, copy.key), await hashVolume(sr, volume.key));
  await writeAt(dest, copy.key, 0, pattern(52, 10));
  assert.deepEqual(await readAt(sr, volume.key, 0, 10), pattern(50, 10));
  // Same-SR copies work and are unrelated to the source's layers.
  const local = await copyVolume(sr, snap.key, sr);
  assert.equal(await hashVolume(sr, local.key), await hashVolume(sr, snap.key));
  assert.deepEqual(checkConsistency(sr), []);
  assert.deepEqual(checkConsistency(dest), []);
});

test("listing 1,000 volumes takes well under 100 ms", async (t) => {
  const sr = await makeSr(t);
  for (let i = 0; i < 1000; i++) {
    const { key } = await createVolume(sr, { name: `v${i}`, description: "", size: MiB });
    if (i % 10 === 0) await setVolumeKey(sr, key, "vdi-type", "user");
  }
  await listVolumes(sr); // warm the statement cache
  const started = performance.now();
  const volumes = await listVolumes(sr);
  const elapsed = performance.now() - started;
  assert.equal(volumes.length, 1000);
  assert.equal(volumes.filter((v) => v.keys["vdi-type"] === "user").length, 100);
  assert.ok(elapsed < 100, `listing took ${elapsed.toFixed(1)} ms`);
  t.diagnostic(`listVolumes(1000): ${elapsed.toFixed(1)} ms`);
});
