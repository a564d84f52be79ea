// Measurements of the file SR (not a test): node server/plugins/filesr/bench.ts [dir] [--reads-only]
//  - snapshot and clone time of a 10 GiB volume with 1 GiB written, then after 5 GiB more;
//  - sequential read throughput through 3-layer chains against a flat volume (page cache as written, reread
//    after a drop, and cold; dropping needs root).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { attachSr, createSr, destroySr } from "./sr.ts";
import { cloneVolume, createVolume, snapshotVolume } from "./volumes.ts";
import { materializeFlatFile, openVolumeData, type VolumeData } from "./volume-data.ts";
import { CLUSTER_SIZE } from "./layout.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
type Results = Record<string, string>;

const DROP_CACHES = "/proc/sys/vm/drop_caches";

function canDropCaches(): boolean {
  try {
    fs.accessSync(DROP_CACHES, fs.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function dropCaches(): void {
  fs.writeFileSync(DROP_CACHES, "3");
}

/** Writes `step`-byte blocks every `every` bytes over [from, from + length) of volume `key`, then flushes. */
async function fill(sr: string, key: string, from: number, length: number, step: number, every = step): Promise<number> {
  const volume = await openVolumeData(sr, key);
  const data = Buffer.alloc(step);
  for (let i = 0; i < step; i += 4) data.writeUInt32LE((i * 2654435761) >>> 0, i);
  const started = performance.now();
  for (let offset = from; offset < from + length; offset += every) {
    data.writeUInt32LE(offset / step, 0);
    await volume.write(offset, data);
  }
  await volume.flush();
  const elapsed = performance.now() - started;
  await volume.close();
  return elapsed;
}

/** MB/s reading the first GiB of an open volume in 1 MiB requests, `depth` in flight (nbdcopy keeps several). */
async function readPass(volume: VolumeData, depth: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: depth }, async () => {
      const buffer = Buffer.alloc(MiB);
      for (let offset = next; offset < GiB; offset = next) {
        next += MiB;
        await volume.read(offset, buffer);
      }
    }),
  );
  return 1024 / ((performance.now() - started) / 1000);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function elapsed(action: () => Promise<unknown>): Promise<string> {
  const started = performance.now();
  await action();
  return `${(performance.now() - started).toFixed(1)} ms`;
}

async function measureSnapshots(sr: string, results: Results): Promise<void> {
  const { key } = await createVolume(sr, { name: "big", description: "", size: 10 * GiB });
  results["write 1 GiB (1 MiB writes + flush)"] = `${(1024 / ((await fill(sr, key, 0, GiB, MiB)) / 1000)).toFixed(0)} MB/s`;
  results["snapshot, 1 GiB written"] = await elapsed(() => snapshotVolume(sr, key));
  results["clone, 1 GiB written"] = await elapsed(() => cloneVolume(sr, key));
  const writer = await openVolumeData(sr, key);
  const block = Buffer.alloc(4 * MiB, 3);
  for (let offset = GiB; offset < 6 * GiB; offset += block.length) await writer.write(offset, block);
  await writer.flush();
  // With the writer still open: includes the pause handshake (drain, flush, switch of top layer).
  results["snapshot, +5 GiB written, writer open"] = await elapsed(() => snapshotVolume(sr, key));
  await writer.close();
  results["snapshot, +5 GiB written"] = await elapsed(() => snapshotVolume(sr, key));
  results["clone, +5 GiB written"] = await elapsed(() => cloneVolume(sr, key));
  const fresh = await createVolume(sr, { name: "fresh", description: "", size: 10 * GiB });
  results["materializeFlatFile, empty 10 GiB volume"] = await elapsed(() => materializeFlatFile(sr, fresh.key));
}

async function measureReads(sr: string, results: Results): Promise<void> {
  // Flat: one layer with 1 GiB. Based chain: the same under two empty snapshots' layers. Clustered chain: base 1 GiB, middle 4 MiB in every 16, top 256 KiB in
  // every 4 MiB (writes that come in extents, as a guest's do). Split chain: base 1 GiB, middle every 3rd
  // MiB, top the first cluster of every MiB, so every 1 MiB request needs two reads.
  const based = await createVolume(sr, { name: "based", description: "", size: GiB });
  await fill(sr, based.key, 0, GiB, MiB);
  await snapshotVolume(sr, based.key);
  await snapshotVolume(sr, based.key);
  const clustered = await createVolume(sr, { name: "clustered", description: "", size: GiB });
  await fill(sr, clustered.key, 0, GiB, MiB);
  await snapshotVolume(sr, clustered.key);
  await fill(sr, clustered.key, 0, GiB, 4 * MiB, 16 * MiB);
  await snapshotVolume(sr, clustered.key);
  await fill(sr, clustered.key, 3 * MiB + 5 * CLUSTER_SIZE, GiB - 4 * MiB, 4 * CLUSTER_SIZE, 4 * MiB);
  const flat = await createVolume(sr, { name: "flat", description: "", size: GiB });
  await fill(sr, flat.key, 0, GiB, MiB);
  const chain = await createVolume(sr, { name: "chain", description: "", size: GiB });
  await fill(sr, chain.key, 0, GiB, MiB);
  await snapshotVolume(sr, chain.key);
  await fill(sr, chain.key, 0, GiB, MiB, 3 * MiB);
  await snapshotVolume(sr, chain.key);
  await fill(sr, chain.key, 0, GiB, CLUSTER_SIZE, 16 * CLUSTER_SIZE);
  // Worst case: the layers alternate every cluster, so no two adjacent clusters share a layer.
  const striped = await createVolume(sr, { name: "striped", description: "", size: GiB });
  await fill(sr, striped.key, 0, GiB, MiB);
  for (const start of [1, 2]) {
    await snapshotVolume(sr, striped.key);
    await fill(sr, striped.key, start * CLUSTER_SIZE, GiB - start * CLUSTER_SIZE, CLUSTER_SIZE, 3 * CLUSTER_SIZE);
  }
  const volumes = [
    ["flat", flat.key],
    ["3-layer chain, all data in the base", based.key],
    ["3-layer chain, clustered writes", clustered.key],
    ["3-layer chain, every request split", chain.key],
    ["3-layer striped (worst case)", striped.key],
  ] as const;
  const flatHandle = await openVolumeData(sr, flat.key, { readOnly: true });
  // Cache states: "written" = in the page cache as the writes left it; "reread" = dropped, then read once
  // (the kernel caches it in smaller pieces, which makes split reads relatively dearer); "cold" = dropped
  // before every pass (root only). The machine may be busy with other work: each chain is measured in A/B
  // pairs with the flat volume (flat pass, chain pass, five times) and the medians are kept.
  for (const cache of canDropCaches() ? (["written", "reread", "cold"] as const) : (["written"] as const)) {
    if (cache === "reread") dropCaches();
    for (const depth of [1, 8]) {
      for (const [name, key] of volumes.slice(1)) {
        const handle = await openVolumeData(sr, key, { readOnly: true });
        const flatSamples: number[] = [];
        const samples: number[] = [];
        if (cache !== "cold") for (const warm of [flatHandle, handle]) await readPass(warm, depth);
        for (let round = 0; round < 5; round++) {
          if (cache === "cold") dropCaches();
          flatSamples.push(await readPass(flatHandle, depth));
          if (cache === "cold") dropCaches();
          samples.push(await readPass(handle, depth));
        }
        await handle.close();
        const ratios = samples.map((value, round) => value / flatSamples[round]!);
        results[`read ${name}, ${cache}, ${depth} in flight`] =
          `${median(samples).toFixed(0)} MB/s vs flat ${median(flatSamples).toFixed(0)} MB/s: ratio ${median(ratios).toFixed(2)}`;
      }
    }
  }
  await flatHandle.close();
}

const readsOnly = process.argv.includes("--reads-only");
const dir = process.argv.slice(2).find((arg) => !arg.startsWith("--")) ?? os.tmpdir();
const root = fs.mkdtempSync(path.join(dir, "filesr-bench-"));
const sr = path.join(root, "sr");
await createSr(sr, { uuid: randomUUID(), name: "bench", description: "" });
await attachSr(sr);
try {
  const results: Results = {};
  if (!readsOnly) await measureSnapshots(sr, results);
  await measureReads(sr, results);
  for (const [name, value] of Object.entries(results)) console.log(`${name.padEnd(58)} ${value}`);
} finally {
  await destroySr(sr);
  fs.rmSync(root, { recursive: true, force: true });
}
