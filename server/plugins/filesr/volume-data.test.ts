import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createVolume, destroyVolume, resizeVolume, snapshotVolume, cloneVolume, statVolume } from "./volumes.ts";
import { materializeFlatFile, openVolumeData } from "./volume-data.ts";
import { recordActivation, clearActivation } from "./activations.ts";
import { collectGarbage } from "./gc.ts";
import { readSrIo } from "./stats.ts";
import { STATE_HOLE, STATE_ZERO } from "../../nbd/backend.ts";
import { FileSrError } from "./errors.ts";
import { CLUSTER_SIZE, srFiles } from "./layout.ts";
import { checkConsistency, hashVolume, makeSr, pattern, readAt, writeAt } from "./test-support.ts";

const MiB = 1024 * 1024;
const HOLE = STATE_HOLE | STATE_ZERO;

function rejectsWith(kind: string, code?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof FileSrError, `expected FileSrError, got ${String(error)}`);
    assert.equal(error.kind, kind, error.message);
    if (code) assert.equal(error.code, code, error.message);
    return true;
  };
}

/** A tiny deterministic random generator for operation sequences. */
function random(seed: number) {
  let state = seed >>> 0 || 1;
  return (below: number) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % below;
  };
}

test("holes read as zeros and block status reports them as HOLE|ZERO", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 16 * CLUSTER_SIZE });
  const volume = await openVolumeData(sr, key);
  assert.equal(volume.size, 16 * CLUSTER_SIZE);
  assert.equal(volume.readOnly, false);
  const buffer = Buffer.alloc(volume.size, 0xff);
  await volume.read(0, buffer);
  assert.ok(buffer.every((byte) => byte === 0));
  assert.deepEqual(await volume.blockStatus(0, volume.size), [{ length: volume.size, flags: HOLE }]);
  await volume.write(3 * CLUSTER_SIZE + 10, Buffer.from("hello"));
  await volume.write(4 * CLUSTER_SIZE, Buffer.alloc(CLUSTER_SIZE, 1));
  assert.deepEqual(await volume.blockStatus(0, volume.size), [
    { length: 3 * CLUSTER_SIZE, flags: HOLE },
    { length: 2 * CLUSTER_SIZE, flags: 0 },
    { length: 11 * CLUSTER_SIZE, flags: HOLE },
  ]);
  assert.deepEqual(await volume.blockStatus(3 * CLUSTER_SIZE + 100, 200), [{ length: 200, flags: 0 }]);
  await volume.writeZeroes(4 * CLUSTER_SIZE, CLUSTER_SIZE);
  assert.deepEqual(await volume.blockStatus(4 * CLUSTER_SIZE, CLUSTER_SIZE), [{ length: CLUSTER_SIZE, flags: HOLE }]);
  await volume.writeZeroes(5 * CLUSTER_SIZE, CLUSTER_SIZE, { noHole: true });
  assert.deepEqual(await volume.blockStatus(5 * CLUSTER_SIZE, CLUSTER_SIZE), [{ length: CLUSTER_SIZE, flags: 0 }]);
  const check = Buffer.alloc(3 * CLUSTER_SIZE);
  await volume.read(3 * CLUSTER_SIZE, check);
  assert.equal(check.toString("latin1", 10, 15), "hello");
  assert.ok(check.subarray(CLUSTER_SIZE).every((byte) => byte === 0));
  await volume.close();
});

test("random writes, zeroes and trims through a chain of snapshots match a flat model", async (t) => {
  const sr = await makeSr(t);
  const size = 48 * CLUSTER_SIZE;
  const { key } = await createVolume(sr, { name: "v", description: "", size });
  const model = Buffer.alloc(size);
  const snapshots: Array<{ key: string; content: Buffer }> = [];
  const next = random(7);
  for (let round = 0; round < 6; round++) {
    const volume = await openVolumeData(sr, key);
    for (let op = 0; op < 60; op++) {
      const offset = next(size - 1);
      const length = 1 + next(Math.min(size - offset, 3 * CLUSTER_SIZE));
      const kind = next(10);
      if (kind < 7) {
        const data = pattern(round * 1000 + op, length);
        await volume.write(offset, data);
        data.copy(model, offset);
      } else if (kind < 9) {
        await volume.writeZeroes(offset, length, { noHole: kind === 8 });
        model.fill(0, offset, offset + length);
      } else {
        // Trim is advisory: whole clusters may then read as zeros; make the model agree by rewriting.
        await volume.trim(offset, length);
        const data = pattern(round * 1000 + op + 500, length);
        await volume.write(offset, data);
        data.copy(model, offset);
      }
    }
    const whole = Buffer.alloc(size);
    await volume.read(0, whole);
    assert.ok(whole.equals(model), `round ${round}: volume differs from the model`);
    await volume.close();
    const snap = await snapshotVolume(sr, key);
    snapshots.push({ key: snap.key, content: Buffer.from(model) });
  }
  for (const snap of snapshots) assert.ok((await readAt(sr, snap.key, 0, size)).equals(snap.content));
  assert.ok((await readAt(sr, key, 0, size)).equals(model));
  // Unaligned reads crossing layers and clusters.
  for (let i = 0; i < 50; i++) {
    const offset = next(size - 1);
    const length = 1 + next(size - offset);
    assert.ok((await readAt(sr, key, offset, length)).equals(model.subarray(offset, offset + length)));
  }
});

test("a read-only handle refuses writes; ranges are checked", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const volume = await openVolumeData(sr, key, { readOnly: true });
  assert.equal(volume.readOnly, true);
  await assert.rejects(volume.write(0, Buffer.alloc(1)), rejectsWith("Invalid", "read_only"));
  await assert.rejects(volume.trim(0, CLUSTER_SIZE), rejectsWith("Invalid", "read_only"));
  await assert.rejects(volume.read(MiB - 1, Buffer.alloc(2)), rejectsWith("Invalid", "out_of_range"));
  await assert.rejects(volume.read(-1, Buffer.alloc(1)), rejectsWith("Invalid", "out_of_range"));
  await volume.close();
  await assert.rejects(volume.read(0, Buffer.alloc(1)), rejectsWith("Invalid", "closed"));
});

test("one writer per volume; activation elsewhere is Activated_on_another_host", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const writer = await openVolumeData(sr, key, { host: "host-a" });
  await assert.rejects(openVolumeData(sr, key, { host: "host-a" }), rejectsWith("Invalid", "volume_in_use"));
  await assert.rejects(openVolumeData(sr, key, { host: "host-b" }), rejectsWith("Activated_on_another_host"));
  const reader = await openVolumeData(sr, key, { readOnly: true });
  await reader.close();
  await writer.close();
  await recordActivation(sr, key, { host: "host-b", domain: "7", mode: "rw" });
  await assert.rejects(openVolumeData(sr, key, { host: "host-a" }), (error: unknown) => {
    assert.ok(error instanceof FileSrError);
    assert.equal(error.kind, "Activated_on_another_host");
    assert.deepEqual(error.params, ["host-b"]);
    return true;
  });
  await clearActivation(sr, key, { host: "host-b", domain: "7" });
  await (await openVolumeData(sr, key, { host: "host-a" })).close();
});

test("an overlay keeps writes only until close (non-persistent datapath)", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  await writeAt(sr, key, 0, pattern(1, MiB));
  const files = fs.readdirSync(srFiles(sr).layers).length;
  const overlay = await openVolumeData(sr, key, { overlay: true });
  await overlay.write(100, Buffer.from("scratch"));
  await overlay.flush();
  const seen = Buffer.alloc(7);
  await overlay.read(100, seen);
  assert.equal(seen.toString(), "scratch");
  assert.equal(fs.readdirSync(srFiles(sr).layers).length, files + 2);
  await overlay.close();
  assert.equal(fs.readdirSync(srFiles(sr).layers).length, files);
  assert.deepEqual(await readAt(sr, key, 0, MiB), pattern(1, MiB));
});

test("a live writer is paused for a snapshot and continues in the new top layer", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const writer = await openVolumeData(sr, key);
  let snap, clone;
  try {
    await writer.write(0, Buffer.from("before"));
    snap = await snapshotVolume(sr, key);
    await writer.write(0, Buffer.from("after!"));
    await writer.write(CLUSTER_SIZE - 3, Buffer.from("straddle"));
    clone = await cloneVolume(sr, key);
    await writer.write(CLUSTER_SIZE - 3, Buffer.from("STRADDLE"));
  } finally {
    await writer.close();
  }
  assert.equal((await readAt(sr, snap.key, 0, 6)).toString(), "before");
  assert.equal((await readAt(sr, key, 0, 6)).toString(), "after!");
  assert.equal((await readAt(sr, clone.key, CLUSTER_SIZE - 3, 8)).toString(), "straddle");
  assert.equal((await readAt(sr, key, CLUSTER_SIZE - 3, 8)).toString(), "STRADDLE");
  assert.deepEqual(checkConsistency(sr), []);
});

test("back-to-back and simultaneous snapshots of a live writer do not wait for it to notice each release", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const writer = await openVolumeData(sr, key);
  let snaps;
  try {
    await writer.write(0, Buffer.from("one"));
    const started = Date.now();
    snaps = [await snapshotVolume(sr, key), await snapshotVolume(sr, key), await cloneVolume(sr, key)];
    // And several callers at once.
    snaps.push(...(await Promise.all([snapshotVolume(sr, key), cloneVolume(sr, key), snapshotVolume(sr, key)])));
    assert.ok(Date.now() - started < 5000, `six live snapshots and clones took ${Date.now() - started} ms`);
    await writer.write(0, Buffer.from("two"));
  } finally {
    await writer.close();
  }
  for (const other of snaps) assert.equal((await readAt(sr, other.key, 0, 3)).toString(), "one");
  assert.equal((await readAt(sr, key, 0, 3)).toString(), "two");
  assert.deepEqual(checkConsistency(sr), []);
});

test("snapshots of a volume written by another process are consistent prefixes", async (t) => {
  const sr = await makeSr(t);
  const blocks = 400;
  const { key } = await createVolume(sr, { name: "v", description: "", size: blocks * CLUSTER_SIZE });
  const worker = fileURLToPath(new URL("./test-workers/sequential-writer.ts", import.meta.url));
  const child = spawn(process.execPath, [worker, sr, key, String(blocks)], { stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => child.kill("SIGKILL"));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  const snaps: string[] = [];
  while (child.exitCode === null && snaps.length < 8) {
    snaps.push((await snapshotVolume(sr, key)).key);
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  assert.equal(await exited, 0);
  assert.ok(snaps.length >= 2);
  let previous = -1;
  const prefixes: number[] = [];
  for (const snapKey of snaps) {
    const content = await readAt(sr, snapKey, 0, blocks * CLUSTER_SIZE);
    let written = 0;
    while (written < blocks && content.readUInt32LE(written * CLUSTER_SIZE) === written + 1) written++;
    assert.ok(content.subarray(written * CLUSTER_SIZE).every((byte) => byte === 0), "a snapshot must be a prefix of the writes");
    assert.ok(written >= previous, "later snapshots hold at least as much");
    previous = written;
    prefixes.push(written);
  }
  t.diagnostic(`blocks in each snapshot: ${prefixes.join(", ")}`);
  assert.ok(prefixes.some((n) => n > 0 && n < blocks), "some snapshot was taken mid-way");
  const final = await readAt(sr, key, 0, blocks * CLUSTER_SIZE);
  for (let block = 0; block < blocks; block++) assert.equal(final.readUInt32LE(block * CLUSTER_SIZE), block + 1);
});

test("reads through a chain of 4 layers fall through to the right layer", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 8 * CLUSTER_SIZE });
  // Layer k writes clusters k..7: each cluster's newest writer is visible.
  for (let layer = 0; layer < 4; layer++) {
    for (let cluster = layer; cluster < 8; cluster += 2) await writeAt(sr, key, cluster * CLUSTER_SIZE, Buffer.alloc(CLUSTER_SIZE, 10 + layer));
    await snapshotVolume(sr, key);
  }
  const content = await readAt(sr, key, 0, 8 * CLUSTER_SIZE);
  const expected = [10, 11, 12, 13, 12, 13, 12, 13];
  for (let cluster = 0; cluster < 8; cluster++) assert.equal(content[cluster * CLUSTER_SIZE + 1000], expected[cluster], `cluster ${cluster}`);
});

test("materializeFlatFile gives a raw file with the whole volume; writes to it are the volume's", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 4 * MiB });
  await writeAt(sr, key, 0, pattern(1, MiB));
  await snapshotVolume(sr, key);
  await writeAt(sr, key, 2 * MiB + 7, pattern(2, 3 * CLUSTER_SIZE));
  const snap = await snapshotVolume(sr, key);
  await writeAt(sr, key, 10, pattern(3, 10));
  const expected = await readAt(sr, key, 0, 4 * MiB);
  const file = await materializeFlatFile(sr, key);
  assert.equal(fs.statSync(file).size, 4 * MiB);
  assert.ok(fs.readFileSync(file).equals(expected));
  // Idempotent, same path.
  assert.equal(await materializeFlatFile(sr, key), file);
  const fd = fs.openSync(file, "r+");
  fs.writeSync(fd, Buffer.from("raw write"), 0, 9, 3 * MiB);
  fs.closeSync(fd);
  assert.equal((await readAt(sr, key, 3 * MiB, 9)).toString(), "raw write");
  // The snapshot taken before materializing still reads its own content.
  const snapContent = await readAt(sr, snap.key, 0, 4 * MiB);
  assert.ok(snapContent.subarray(0, 10).equals(expected.subarray(0, 10)));
  assert.ok(snapContent.subarray(20).equals(expected.subarray(20)));
  assert.ok(snapContent.subarray(10, 20).equals(pattern(1, MiB).subarray(10, 20)));
  // While its raw file is activated read-write, a snapshot is a read-only copy of the file's content.
  await recordActivation(sr, key, { host: "h", domain: "1", mode: "rw" });
  const copied = await snapshotVolume(sr, key, { host: "h" });
  assert.equal(copied.read_write, false);
  assert.ok((await readAt(sr, copied.key, 0, 4 * MiB)).equals(await readAt(sr, key, 0, 4 * MiB)));
  const clone = await cloneVolume(sr, key, { host: "h" });
  assert.equal(clone.read_write, true);
  assert.equal((await readAt(sr, clone.key, 3 * MiB, 9)).toString(), "raw write");
  await clearActivation(sr, key, { host: "h", domain: "1" });
  const later = await snapshotVolume(sr, key);
  assert.equal((await readAt(sr, later.key, 3 * MiB, 9)).toString(), "raw write");
  await collectGarbage(sr);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
});

test("materializeFlatFile clears bytes a crashed writer left outside the allocated clusters", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 64 * CLUSTER_SIZE });
  await writeAt(sr, key, 0, Buffer.alloc(CLUSTER_SIZE, 1));
  // A writer process dies: whatever it wrote after its last flush is in the file but not in the map.
  const worker = fileURLToPath(new URL("./test-workers/sequential-writer.ts", import.meta.url));
  const child = spawn(process.execPath, [worker, sr, key, "0", "hold"], { stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => child.kill("SIGKILL"));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.on("exit", resolve));
  // Such bytes, planted where the map says nothing is.
  const { DatabaseSync } = await import("node:sqlite");
  const db = new DatabaseSync(srFiles(sr).db, { readOnly: true });
  const { token } = db.prepare("SELECT token FROM layers WHERE id = (SELECT top_layer FROM volumes WHERE key = ?)").get(key) as { token: string };
  db.close();
  const fd = fs.openSync(path.join(srFiles(sr).layers, `${token}.data`), "r+");
  fs.writeSync(fd, Buffer.alloc(100, 0xee), 0, 100, 50 * CLUSTER_SIZE);
  fs.closeSync(fd);
  const expected = await readAt(sr, key, 0, 64 * CLUSTER_SIZE);
  assert.ok(expected.subarray(50 * CLUSTER_SIZE).every((byte) => byte === 0), "unmapped bytes are not data");
  const file = await materializeFlatFile(sr, key);
  assert.ok(fs.readFileSync(file).equals(expected));
});

test("materializeFlatFile after zeroing and a merge still gives zeros where the volume reads zeros", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 4 * CLUSTER_SIZE });
  await writeAt(sr, key, 0, Buffer.alloc(4 * CLUSTER_SIZE, 7));
  await materializeFlatFile(sr, key);
  await resizeVolume(sr, key, 64 * CLUSTER_SIZE); // the grown part of a complete layer is DATA yet unallocated
  const snap = await snapshotVolume(sr, key);
  const volume = await openVolumeData(sr, key);
  await volume.writeZeroes(0, 2 * CLUSTER_SIZE);
  await volume.close();
  await destroyVolume(sr, snap.key);
  assert.equal((await collectGarbage(sr)).merged, 1);
  const expected = await readAt(sr, key, 0, 64 * CLUSTER_SIZE);
  assert.ok(expected.subarray(0, 2 * CLUSTER_SIZE).every((byte) => byte === 0));
  const file = await materializeFlatFile(sr, key);
  assert.ok(fs.readFileSync(file).equals(expected));
});

test("I/O counters record datapath reads and writes", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  const before = readSrIo(sr);
  await writeAt(sr, key, 0, Buffer.alloc(4096, 1));
  await readAt(sr, key, 0, 8192);
  await readAt(sr, key, 0, 100);
  const after = readSrIo(sr);
  assert.equal(after.writeBytes - before.writeBytes, 4096);
  assert.equal(after.writeOps - before.writeOps, 1);
  assert.equal(after.readBytes - before.readBytes, 8292);
  assert.equal(after.readOps - before.readOps, 2);
  assert.ok(after.readLatencyUs >= before.readLatencyUs);
  assert.deepEqual(fs.readdirSync(srFiles(sr).stats), [], "a process with no open volume keeps no stats file");
  const volume = await openVolumeData(sr, key);
  await volume.write(0, Buffer.alloc(10));
  assert.equal(readSrIo(sr).writeOps - after.writeOps, 1);
  assert.equal(fs.readdirSync(srFiles(sr).stats).length, 1);
  await volume.close();
  await destroyVolume(sr, key);
  assert.equal((await statVolume(sr, (await createVolume(sr, { name: "w", description: "", size: 1 })).key)).virtual_size, CLUSTER_SIZE);
});

test("the hash of a volume is stable across GC of its chain", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 8 * MiB });
  await writeAt(sr, key, 0, pattern(9, 3 * MiB));
  const snap = await snapshotVolume(sr, key);
  await writeAt(sr, key, MiB + 5, pattern(10, MiB));
  const hash = await hashVolume(sr, key);
  await destroyVolume(sr, snap.key);
  const report = await collectGarbage(sr);
  assert.equal(report.merged, 1);
  assert.equal(await hashVolume(sr, key), hash);
  assert.ok(path.isAbsolute(sr));
});
