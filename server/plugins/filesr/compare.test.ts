// compareVolumes with zeroed clusters: ZERO over a chain that reads zeros is no change, ZERO over data is,
// whichever volume is named first; CBT still reports every written block.
import { test } from "node:test";
import assert from "node:assert/strict";
import { cloneVolume, createVolume, resizeVolume, snapshotVolume } from "./volumes.ts";
import { compareVolumes } from "./compare.ts";
import { enableCbt, listChangedBlocks } from "./cbt.ts";
import { openVolumeData } from "./volume-data.ts";
import { CLUSTER_SIZE } from "./layout.ts";
import { makeSr, pattern, writeAt } from "./test-support.ts";

type Ranges = Array<[number, number]>;

/** NBD_CMD_WRITE_ZEROES of whole clusters (`noHole`: allocate them, as with NBD_CMD_FLAG_NO_HOLE). */
async function zeroClusters(sr: string, key: string, first: number, count: number, options: { noHole?: boolean } = {}): Promise<void> {
  const volume = await openVolumeData(sr, key);
  try {
    await volume.writeZeroes(first * CLUSTER_SIZE, count * CLUSTER_SIZE, options);
  } finally {
    await volume.close();
  }
}

async function writeClusters(sr: string, key: string, first: number, count: number): Promise<void> {
  await writeAt(sr, key, first * CLUSTER_SIZE, pattern(first, count * CLUSTER_SIZE));
}

/** The compare ranges, checked to be the same with the arguments swapped (for volumes of one size). */
async function compareBothWays(sr: string, a: string, b: string): Promise<Ranges> {
  const forward = await compareVolumes(sr, a, b);
  const backward = await compareVolumes(sr, b, a);
  assert.equal(forward.blocksize, CLUSTER_SIZE);
  assert.deepEqual(backward, forward, `compare(${a}, ${b}) and compare(${b}, ${a}) differ`);
  return forward.ranges;
}

async function newVolume(sr: string, clusters: number): Promise<string> {
  return (await createVolume(sr, { name: "v", description: "", size: clusters * CLUSTER_SIZE })).key;
}

test("zeros written over a chain that reads zeros are no change; zeros over data are", async (t) => {
  const sr = await makeSr(t);
  const key = await newVolume(sr, 16);
  await writeClusters(sr, key, 0, 3);
  const snap = await snapshotVolume(sr, key);
  await zeroClusters(sr, key, 4, 8); // ZERO over ABSENT down to the base
  assert.deepEqual(await compareBothWays(sr, key, snap.key), []);
  await zeroClusters(sr, key, 1, 1); // ZERO over DATA
  assert.deepEqual(await compareBothWays(sr, key, snap.key), [[1, 1]]);
  await writeClusters(sr, key, 13, 1);
  await zeroClusters(sr, key, 13, 1); // written, then zeroed again in the same layer
  assert.deepEqual(await compareBothWays(sr, key, snap.key), [[1, 1]]);
  await writeClusters(sr, key, 14, 1); // DATA over a chain that reads zeros
  assert.deepEqual(await compareBothWays(sr, key, snap.key), [[1, 1], [14, 1]]);
  await zeroClusters(sr, key, 15, 1, { noHole: true }); // allocated zeros are data: contents are not compared
  assert.deepEqual(await compareBothWays(sr, key, snap.key), [[1, 1], [14, 2]]);
  // Unrelated or missing: the non-empty blocks, zeroed ones excluded.
  assert.deepEqual((await compareVolumes(sr, key, "missing-volume")).ranges, [[0, 1], [2, 1], [14, 2]]);
});

test("ZERO over ZERO across snapshots, and ZERO in a clone against the volume it was cloned from", async (t) => {
  const sr = await makeSr(t);
  const key = await newVolume(sr, 16);
  await writeClusters(sr, key, 0, 4);
  const s1 = await snapshotVolume(sr, key);
  await zeroClusters(sr, key, 1, 1);
  const s2 = await snapshotVolume(sr, key);
  await zeroClusters(sr, key, 1, 1); // ZERO over ZERO over DATA
  await zeroClusters(sr, key, 8, 1); // ZERO over ABSENT over ABSENT
  assert.deepEqual(await compareBothWays(sr, key, s2.key), []);
  assert.deepEqual(await compareBothWays(sr, key, s1.key), [[1, 1]]);
  assert.deepEqual(await compareBothWays(sr, s2.key, s1.key), [[1, 1]]);

  const clone = (await cloneVolume(sr, s1.key)).key;
  assert.deepEqual(await compareBothWays(sr, clone, key), [[1, 1]]);
  await zeroClusters(sr, clone, 1, 1); // both ZERO above the common layer
  await zeroClusters(sr, clone, 9, 2); // over nothing, where the volume reads zeros too
  assert.deepEqual(await compareBothWays(sr, clone, key), []);
  assert.deepEqual(await compareBothWays(sr, clone, s2.key), []);
  assert.deepEqual(await compareBothWays(sr, clone, s1.key), [[1, 1]]);
  await zeroClusters(sr, clone, 2, 1); // ZERO over DATA the volume still reads
  await writeClusters(sr, clone, 8, 1); // DATA where the volume has ZERO
  assert.deepEqual(await compareBothWays(sr, clone, key), [[2, 1], [8, 1]]);

  // A clone of the clone's snapshot: ZERO against ZERO two layers up on the other side.
  const s3 = await snapshotVolume(sr, clone);
  const grandchild = (await cloneVolume(sr, s3.key)).key;
  await zeroClusters(sr, grandchild, 1, 3);
  assert.deepEqual(await compareBothWays(sr, grandchild, clone), [[3, 1]]);
  assert.deepEqual(await compareBothWays(sr, grandchild, key), [[2, 2], [8, 1]]);
});

test("zeroing the space a volume grew by is no change against its smaller snapshot", async (t) => {
  const sr = await makeSr(t);
  const key = await newVolume(sr, 8);
  await writeClusters(sr, key, 0, 1);
  const snap = await snapshotVolume(sr, key);
  await resizeVolume(sr, key, 16 * CLUSTER_SIZE);
  await zeroClusters(sr, key, 4, 12);
  assert.deepEqual((await compareVolumes(sr, key, snap.key)).ranges, []);
  assert.deepEqual((await compareVolumes(sr, snap.key, key)).ranges, []);
  await writeClusters(sr, key, 12, 1);
  assert.deepEqual((await compareVolumes(sr, key, snap.key)).ranges, [[12, 1]]);
});

test("CBT keeps its meaning: zeroed blocks are changed blocks, though compare finds no difference", async (t) => {
  const sr = await makeSr(t);
  const key = await newVolume(sr, 16);
  await enableCbt(sr, key);
  await writeClusters(sr, key, 0, 2);
  const snap = await snapshotVolume(sr, key);
  await zeroClusters(sr, key, 4, 8);
  assert.deepEqual(await compareBothWays(sr, key, snap.key), []);
  const { granularity, bitmap } = await listChangedBlocks(sr, snap.key, key, 0, -1);
  assert.equal(granularity, CLUSTER_SIZE);
  // changed_blocks bitmap, most significant bit first: blocks 4..11.
  assert.deepEqual([...Buffer.from(bitmap, "base64")], [0x0f, 0xf0]);
});
