// kill -9 a process doing random SR work at random moments, many times; after each kill the SR must be
// consistent, volumes nobody touched must read the same, and every flush the process reported must hold.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { createInterface } from "node:readline";
import { createVolume, destroyVolume, listVolumes, snapshotVolume } from "./volumes.ts";
import { enableCbt, listChangedBlocks } from "./cbt.ts";
import { collectGarbage } from "./gc.ts";
import { openSr, statSr } from "./sr.ts";
import { CLUSTER_SIZE } from "./layout.ts";
import { checkConsistency, hashVolume, makeSr, pattern, readAt, writeAt } from "./test-support.ts";
import { bytes, random } from "./test-workers/random-ops.ts";

const MiB = 1024 * 1024;
const TIME_BUDGET_MS = 30_000;
const MIN_ROUNDS = 15;

test("kill -9 at random points leaves a consistent SR and never loses flushed data", async (t) => {
  const sr = await makeSr(t);
  // Volumes the worker never touches (GC may merge their chains, which must not change a byte).
  const flat = await createVolume(sr, { name: "s-flat", description: "", size: 4 * MiB });
  await writeAt(sr, flat.key, 0, pattern(1, 4 * MiB));
  const chained = await createVolume(sr, { name: "s-chain", description: "", size: 4 * MiB });
  await enableCbt(sr, chained.key);
  await writeAt(sr, chained.key, 0, pattern(2, 2 * MiB));
  const chainSnap = await snapshotVolume(sr, chained.key);
  await writeAt(sr, chained.key, MiB + 77, pattern(3, MiB));
  const chainSnap2 = await snapshotVolume(sr, chained.key);
  const changed = await listChangedBlocks(sr, chainSnap.key, chainSnap2.key, 0, -1);
  const mergeable: string[] = [];
  const sentinels = [flat.key, chained.key, chainSnap.key, chainSnap2.key];
  const hashes = new Map<string, string>();
  for (const key of sentinels) hashes.set(key, await hashVolume(sr, key));

  /** A fresh merge candidate each round, so GC merges get interrupted too. */
  async function addMergeCandidate(round: number) {
    const { key } = await createVolume(sr, { name: `s-merge-${round}`, description: "", size: 8 * MiB });
    await writeAt(sr, key, 0, pattern(100 + round, 8 * MiB));
    const snap = await snapshotVolume(sr, key);
    await writeAt(sr, key, 0, pattern(200 + round, 6 * MiB));
    await destroyVolume(sr, snap.key);
    mergeable.push(key);
    hashes.set(key, await hashVolume(sr, key));
  }

  const worker = fileURLToPath(new URL("./test-workers/crash-worker.ts", import.meta.url));
  const next = random(20240501);
  const started = Date.now();
  let rounds = 0;
  let flushedRecords = 0;
  while (rounds < MIN_ROUNDS || Date.now() - started < TIME_BUDGET_MS) {
    if (rounds % 3 === 0) await addMergeCandidate(rounds);
    const seed = 1 + next(1_000_000);
    const child = spawn(process.execPath, [worker, sr, String(seed)], { stdio: ["ignore", "pipe", "pipe"] });
    t.after(() => child.kill("SIGKILL"));
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    let journal = "";
    let flushed = -1;
    const lines = createInterface({ input: child.stdout });
    lines.on("line", (line) => {
      const [word, value] = line.split(" ");
      if (word === "journal") journal = value!;
      if (word === "flushed") flushed = Number(value);
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    while (!journal && child.exitCode === null) await sleep(5);
    await sleep(50 + next(700));
    child.kill("SIGKILL");
    const code = await exited;
    assert.equal(code, null, `worker ${seed} failed by itself: ${stderr}`);
    rounds++;

    assert.deepEqual(checkConsistency(sr), [], `round ${rounds} (seed ${seed})`);
    await openSr(sr);
    assert.ok(["Healthy", "Recovering"].includes((await statSr(sr)).health[0]));
    for (const [key, hash] of hashes) assert.equal(await hashVolume(sr, key), hash, `round ${rounds}: volume ${key} changed`);
    if (journal) {
      const content = await readAt(sr, journal, 0, MiB);
      for (let record = 0; record <= flushed; record++) {
        assert.ok(content.subarray(record * 4096, (record + 1) * 4096).equals(bytes(seed * 1000 + record, 4096)), `round ${rounds}: flushed record ${record} lost`);
      }
      flushedRecords += flushed + 1;
    }
    if (rounds % 5 === 0) {
      await collectGarbage(sr);
      assert.deepEqual(checkConsistency(sr, { exactFiles: true }), [], `after GC, round ${rounds}`);
    }
  }
  await collectGarbage(sr);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
  assert.deepEqual((await statSr(sr)).health, ["Healthy", ""]);
  for (const [key, hash] of hashes) assert.equal(await hashVolume(sr, key), hash);
  assert.deepEqual(await listChangedBlocks(sr, chainSnap.key, chainSnap2.key, 0, -1), changed);
  // Every volume left behind by the killed workers is readable end to end.
  const volumes = await listVolumes(sr);
  for (const volume of volumes) if (volume.volume_type !== "CBT_Metadata") await hashVolume(sr, volume.key);
  t.diagnostic(`${rounds} kills, ${volumes.length} volumes left, ${flushedRecords} flushed records checked, ${mergeable.length} merge candidates`);
  assert.equal(CLUSTER_SIZE, 65536);
});
