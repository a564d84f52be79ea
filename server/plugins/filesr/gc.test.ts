import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { DatabaseSync } from "node:sqlite";
import { cloneVolume, createVolume, destroyVolume, resizeVolume, snapshotVolume } from "./volumes.ts";
import { clearActivation, recordActivation } from "./activations.ts";
import { openVolumeData } from "./volume-data.ts";
import { collectGarbage, startGarbageCollector } from "./gc.ts";
import { statSr } from "./sr.ts";
import { srFiles } from "./layout.ts";
import { checkConsistency, hashVolume, makeSr, pattern, readAt, writeAt } from "./test-support.ts";

const MiB = 1024 * 1024;

function layerCount(sr: string): number {
  const db = new DatabaseSync(srFiles(sr).db, { readOnly: true });
  try {
    return (db.prepare("SELECT count(*) AS n FROM layers").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

function mergeRows(sr: string): number {
  const db = new DatabaseSync(srFiles(sr).db, { readOnly: true, timeout: 5000 });
  try {
    return (db.prepare("SELECT count(*) AS n FROM merges").get() as { n: number }).n;
  } finally {
    db.close();
  }
}

/** A volume whose top layer holds `childBytes` over a base, with the snapshot between them destroyed. */
async function mergeCandidate(sr: string, childBytes: number, size = 64 * MiB) {
  const { key } = await createVolume(sr, { name: "v", description: "", size });
  await writeAt(sr, key, 0, pattern(1, Math.min(size, 8 * MiB)));
  const snap = await snapshotVolume(sr, key);
  const volume = await openVolumeData(sr, key);
  const chunk = pattern(2, 4 * MiB);
  for (let offset = 0; offset < childBytes; offset += chunk.length) {
    await volume.write(offset, chunk.subarray(0, Math.min(chunk.length, childBytes - offset)));
  }
  await volume.close();
  await destroyVolume(sr, snap.key);
  return key;
}

test("destroying a snapshot lets GC merge the chain, keeping every byte", async (t) => {
  const sr = await makeSr(t);
  const key = await mergeCandidate(sr, 3 * MiB);
  const clone = await cloneVolume(sr, key); // a second lineage sharing the merged layers
  await writeAt(sr, clone.key, 5 * MiB + 3, pattern(3, 100));
  const hashes = [await hashVolume(sr, key), await hashVolume(sr, clone.key)];
  const layers = layerCount(sr);
  const report = await collectGarbage(sr);
  assert.equal(report.merged, 1, JSON.stringify(report));
  assert.equal(layerCount(sr), layers - 1);
  assert.deepEqual([await hashVolume(sr, key), await hashVolume(sr, clone.key)], hashes);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
  // Nothing left to do.
  assert.equal((await collectGarbage(sr)).merged, 0);
});

test("GC leaves a chain alone while its volume is activated or open, and merges it afterwards", async (t) => {
  const sr = await makeSr(t);
  const key = await mergeCandidate(sr, MiB, 16 * MiB);
  await recordActivation(sr, key, { host: "h", domain: "1", mode: "rw" });
  assert.equal((await collectGarbage(sr)).merged, 0);
  await clearActivation(sr, key, { host: "h", domain: "1" });
  const reader = await openVolumeData(sr, key, { readOnly: true });
  assert.equal((await collectGarbage(sr)).merged, 0);
  await reader.close();
  const hash = await hashVolume(sr, key);
  assert.equal((await collectGarbage(sr)).merged, 1);
  assert.equal(await hashVolume(sr, key), hash);
});

test("merging a child that grew past its parent keeps the grown part", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: 2 * MiB });
  await writeAt(sr, key, 0, pattern(1, 2 * MiB));
  const snap = await snapshotVolume(sr, key);
  await resizeVolume(sr, key, 6 * MiB);
  await writeAt(sr, key, 5 * MiB, pattern(2, MiB));
  await destroyVolume(sr, snap.key);
  const hash = await hashVolume(sr, key);
  assert.equal((await collectGarbage(sr)).merged, 1);
  assert.equal(await hashVolume(sr, key), hash);
  const data = await readAt(sr, key, 0, 6 * MiB);
  assert.ok(data.subarray(2 * MiB, 5 * MiB).every((byte) => byte === 0));
  await writeAt(sr, key, 5 * MiB + 10, Buffer.from("after merge"));
  assert.equal((await readAt(sr, key, 5 * MiB + 10, 11)).toString(), "after merge");
});

test("a writer opening the volume cancels a running merge; nothing is lost", async (t) => {
  const sr = await makeSr(t);
  const key = await mergeCandidate(sr, 48 * MiB);
  const running = collectGarbage(sr);
  while (mergeRows(sr) === 0) await sleep(1);
  const writer = await openVolumeData(sr, key);
  await writer.write(MiB, Buffer.from("written during the merge"));
  await writer.flush();
  const report = await running;
  assert.equal(report.merged, 0);
  assert.equal(report.cancelled, 1);
  await writer.close();
  assert.equal((await readAt(sr, key, MiB, 24)).toString(), "written during the merge");
  assert.deepEqual((await readAt(sr, key, 8 * MiB, 100)), pattern(2, 4 * MiB).subarray(0, 100));
  assert.equal((await collectGarbage(sr)).merged, 1);
  assert.equal((await readAt(sr, key, MiB, 24)).toString(), "written during the merge");
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
});

test("kill -9 in the middle of a merge: every volume reads the same, SR says Recovering, the next GC finishes", async (t) => {
  const sr = await makeSr(t);
  const key = await mergeCandidate(sr, 160 * MiB, 192 * MiB);
  const other = await createVolume(sr, { name: "bystander", description: "", size: 4 * MiB });
  await writeAt(sr, other.key, 0, pattern(9, 4 * MiB));
  const hashes = [await hashVolume(sr, key), await hashVolume(sr, other.key)];
  const main = fileURLToPath(new URL("./gc-main.ts", import.meta.url));
  const child = spawn(process.execPath, [main, sr], { stdio: "ignore" });
  t.after(() => child.kill("SIGKILL"));
  while (mergeRows(sr) === 0) await sleep(2);
  await sleep(50);
  child.kill("SIGKILL");
  await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(mergeRows(sr), 1, "the merge was interrupted");
  assert.equal((await statSr(sr)).health[0], "Recovering");
  assert.deepEqual([await hashVolume(sr, key), await hashVolume(sr, other.key)], hashes);
  const report = await collectGarbage(sr);
  assert.equal(report.merged, 1);
  assert.deepEqual((await statSr(sr)).health, ["Healthy", ""]);
  assert.deepEqual([await hashVolume(sr, key), await hashVolume(sr, other.key)], hashes);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
});

test("GC removes orphan files, temporary files and the layers of dead processes", async (t) => {
  const sr = await makeSr(t);
  const { key } = await createVolume(sr, { name: "v", description: "", size: MiB });
  fs.writeFileSync(path.join(srFiles(sr).layers, "0123456789abcdef.data"), "orphan");
  fs.writeFileSync(path.join(srFiles(sr).layers, "x.map.tmp-1-abcd"), "half written");
  fs.writeFileSync(path.join(srFiles(sr).cbt, "fedcba9876543210.cbt"), "orphan log");
  // A non-persistent datapath process dies with its overlay layer open.
  const worker = fileURLToPath(new URL("./test-workers/overlay-holder.ts", import.meta.url));
  const child = spawn(process.execPath, [worker, sr, key], { stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => child.kill("SIGKILL"));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  child.kill("SIGKILL");
  await new Promise((resolve) => child.on("exit", resolve));
  assert.equal(layerCount(sr), 2);
  const report = await collectGarbage(sr);
  assert.equal(report.deletedLayers, 1, JSON.stringify(report));
  assert.equal(report.deletedFiles, 3);
  assert.equal(layerCount(sr), 1);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
  assert.deepEqual(await readAt(sr, key, 0, 10), Buffer.alloc(10));
});

test("only one collector runs at a time; one asked for meanwhile is a further pass of it; else startGarbageCollector starts one in the background", async (t) => {
  const sr = await makeSr(t);
  const key = await mergeCandidate(sr, 32 * MiB);
  const hash = await hashVolume(sr, key);
  const first = collectGarbage(sr);
  while (mergeRows(sr) === 0) await sleep(1);
  const second = await collectGarbage(sr);
  assert.match(second.skipped ?? "", /already running/);
  // Asked for while it merges (as every destroy and deactivate asks): no process started, one more pass made.
  assert.equal(startGarbageCollector(sr), undefined, "no collector started while one runs");
  const report = await first;
  assert.equal(report.merged, 1);
  assert.equal(report.passes, 2, JSON.stringify(report));
  const again = await mergeCandidate(sr, MiB, 8 * MiB);
  const layers = layerCount(sr);
  const pid = startGarbageCollector(sr);
  assert.ok(pid !== undefined && pid > 0);
  const deadline = Date.now() + 20_000;
  while (layerCount(sr) >= layers && Date.now() < deadline) await sleep(20);
  assert.equal(layerCount(sr), layers - 1);
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
      await sleep(20);
    } catch {
      break;
    }
  }
  assert.equal(await hashVolume(sr, key), hash);
  assert.equal((await readAt(sr, again, 0, 4)).length, 4);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
});
