import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createVolume, destroyVolume, resizeVolume, snapshotVolume, statVolume } from "./volumes.ts";
import { destroyVolumeData, disableCbt, enableCbt, listChangedBlocks } from "./cbt.ts";
import { materializeFlatFile, openVolumeData } from "./volume-data.ts";
import { collectGarbage } from "./gc.ts";
import { FileSrError } from "./errors.ts";
import { CLUSTER_SIZE, srFiles } from "./layout.ts";
import { checkConsistency, makeSr, readAt, writeAt } from "./test-support.ts";

const BLOCKS = 20;

function rejectsWith(kind: string, code?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof FileSrError, `expected FileSrError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    if (code) assert.equal(error.code, code, error.message);
    return true;
  };
}

/** Indices of the set bits of a changed_blocks bitmap (most significant bit first). */
function changed(result: { granularity: number; bitmap: string }): number[] {
  assert.equal(result.granularity, CLUSTER_SIZE);
  const bytes = Buffer.from(result.bitmap, "base64");
  const bits: number[] = [];
  for (let i = 0; i < bytes.length * 8; i++) if (bytes[i >> 3]! & (0x80 >> (i & 7))) bits.push(i);
  return bits;
}

async function trackedVolume(t: Parameters<typeof makeSr>[0]) {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: BLOCKS * CLUSTER_SIZE });
  await enableCbt(sr, key);
  return { sr, key };
}

test("enable_cbt changes the volume type; writes between snapshots show up as changed blocks", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const volume = await statVolume(sr, key);
  assert.equal(volume.cbt_enabled, true);
  assert.equal(volume.volume_type, "Data_and_CBT_Metadata");
  await enableCbt(sr, key); // idempotent
  await writeAt(sr, key, CLUSTER_SIZE, Buffer.alloc(10, 1));
  await writeAt(sr, key, 5 * CLUSTER_SIZE, Buffer.alloc(10, 1));
  const s1 = await snapshotVolume(sr, key);
  assert.equal(s1.cbt_enabled, true);
  await writeAt(sr, key, 3 * CLUSTER_SIZE + 5, Buffer.alloc(10, 2));
  await writeAt(sr, key, 7 * CLUSTER_SIZE - 1, Buffer.alloc(2, 2)); // straddles blocks 6 and 7
  const s2 = await snapshotVolume(sr, key);
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, s2.key, 0, -1)), [3, 6, 7]);
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)), [3, 6, 7]);
  assert.deepEqual(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)), []);
  const volumeHandle = await openVolumeData(sr, key);
  await volumeHandle.writeZeroes(9 * CLUSTER_SIZE, CLUSTER_SIZE);
  await volumeHandle.trim(11 * CLUSTER_SIZE, 2 * CLUSTER_SIZE);
  await volumeHandle.close();
  assert.deepEqual(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)), [9, 11, 12]);
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)), [3, 6, 7, 9, 11, 12]);
  // A window of the disk: bit 0 is the block at `offset`.
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, key, 2 * CLUSTER_SIZE, 6 * CLUSTER_SIZE)), [1, 4, 5]);
  const whole = await listChangedBlocks(sr, s1.key, s2.key, 0, -1);
  assert.equal(Buffer.from(whole.bitmap, "base64").length, Math.ceil(BLOCKS / 8));
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, s1.key, 0, -1)), []);
});

test("list_changed_blocks refuses unrelated volumes, bad offsets and untracked volumes", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const s1 = await snapshotVolume(sr, key);
  const other = await createVolume(sr, { name: "o", description: "", size: CLUSTER_SIZE });
  await enableCbt(sr, other.key);
  await assert.rejects(listChangedBlocks(sr, s1.key, other.key, 0, -1), rejectsWith("Invalid", "cbt_unrelated"));
  await assert.rejects(listChangedBlocks(sr, key, s1.key, 0, -1), rejectsWith("Invalid", "cbt_unrelated"));
  await assert.rejects(listChangedBlocks(sr, s1.key, key, 1, -1), rejectsWith("Invalid", "bad_offset"));
  await assert.rejects(listChangedBlocks(sr, s1.key, key, 0, -2), rejectsWith("Invalid", "bad_length"));
  await assert.rejects(listChangedBlocks(sr, s1.key, "missing", 0, -1), rejectsWith("Volume_does_not_exist"));
  await disableCbt(sr, key);
  assert.equal((await statVolume(sr, key)).volume_type, "Data");
  await assert.rejects(listChangedBlocks(sr, s1.key, key, 0, -1), rejectsWith("Invalid", "cbt_unavailable"));
  assert.equal((await snapshotVolume(sr, key)).cbt_enabled, false);
});

test("data_destroy keeps the CBT log: the snapshot becomes CBT_Metadata and still answers", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const s1 = await snapshotVolume(sr, key);
  await writeAt(sr, key, 2 * CLUSTER_SIZE, Buffer.alloc(1, 9));
  const s2 = await snapshotVolume(sr, key);
  await assert.rejects(destroyVolumeData(sr, key), rejectsWith("Invalid", "not_a_snapshot"));
  await destroyVolumeData(sr, s1.key);
  await destroyVolumeData(sr, s1.key); // idempotent
  const meta = await statVolume(sr, s1.key);
  assert.equal(meta.volume_type, "CBT_Metadata");
  assert.equal(meta.physical_utilisation, 0);
  await assert.rejects(openVolumeData(sr, s1.key, { readOnly: true }), rejectsWith("Invalid", "no_data"));
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, s2.key, 0, -1)), [2]);
  const plain = await createVolume(sr, { name: "p", description: "", size: CLUSTER_SIZE });
  const plainSnap = await snapshotVolume(sr, plain.key);
  await assert.rejects(destroyVolumeData(sr, plainSnap.key), rejectsWith("Invalid", "cbt_disabled"));
  await collectGarbage(sr);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
});

test("a writer open across a snapshot keeps tracking into the new log", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const writer = await openVolumeData(sr, key);
  await writer.write(0, Buffer.alloc(1, 1));
  const s1 = await snapshotVolume(sr, key);
  await writer.write(4 * CLUSTER_SIZE, Buffer.alloc(1, 1));
  const s2 = await snapshotVolume(sr, key);
  await writer.write(8 * CLUSTER_SIZE, Buffer.alloc(1, 1));
  await writer.close();
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, s2.key, 0, -1)), [4]);
  assert.deepEqual(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)), [8]);
});

test("a log whose writer died, a volume open for writing, or a raw file path report every block as changed", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const s1 = await snapshotVolume(sr, key);
  const writer = await openVolumeData(sr, key);
  await writer.write(0, Buffer.alloc(1));
  assert.equal(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)).length, BLOCKS, "live writer: unknown");
  await writer.close();
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)), [0]);
  // A writer process killed mid-way leaves its log untrustworthy.
  const worker = fileURLToPath(new URL("./test-workers/sequential-writer.ts", import.meta.url));
  const child = spawn(process.execPath, [worker, sr, key, "100000"], { stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)).length, BLOCKS);
  const s2 = await snapshotVolume(sr, key);
  await writeAt(sr, key, CLUSTER_SIZE, Buffer.alloc(1));
  assert.deepEqual(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)), [1], "tracking recovers in the next log");
  await materializeFlatFile(sr, key);
  assert.equal(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)).length, BLOCKS, "raw writes escape tracking");
});

test("growing a tracked volume marks the new blocks as changed; GC prunes logs no one needs", async (t) => {
  const { sr, key } = await trackedVolume(t);
  const s1 = await snapshotVolume(sr, key);
  await resizeVolume(sr, key, (BLOCKS + 4) * CLUSTER_SIZE);
  assert.deepEqual(changed(await listChangedBlocks(sr, s1.key, key, 0, -1)), [20, 21, 22, 23]);
  const s2 = await snapshotVolume(sr, key);
  const s3 = await snapshotVolume(sr, key);
  const logsBefore = fs.readdirSync(srFiles(sr).cbt).length;
  await destroyVolume(sr, s1.key);
  await destroyVolume(sr, s3.key);
  const report = await collectGarbage(sr);
  assert.ok(report.prunedCbtLogs >= 1, JSON.stringify(report));
  assert.ok(fs.readdirSync(srFiles(sr).cbt).length < logsBefore);
  assert.deepEqual(changed(await listChangedBlocks(sr, s2.key, key, 0, -1)), []);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
  assert.equal((await readAt(sr, key, 0, 1)).length, 1);
});
