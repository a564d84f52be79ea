// Two processes hammering one SR at once: each runs random operations on its own volumes (and GC on all),
// both fight over one shared volume (exclusive writers, live snapshots); at the end each process's volumes
// hold exactly what it wrote and the SR is consistent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createVolume, listVolumes } from "./volumes.ts";
import { collectGarbage } from "./gc.ts";
import { checkConsistency, hashVolume, makeSr } from "./test-support.ts";

const DURATION_MS = 12_000;

interface WorkerResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runWorker(args: string[], track: (kill: () => void) => void): Promise<WorkerResult> {
  const worker = fileURLToPath(new URL("./test-workers/concurrency-worker.ts", import.meta.url));
  const child = spawn(process.execPath, [worker, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  track(() => child.kill("SIGKILL"));
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
}

test("two processes working on one SR at the same time stay correct", async (t) => {
  const sr = await makeSr(t);
  const shared = await createVolume(sr, { name: "shared", description: "", size: 4 * 1024 * 1024 });
  const track = (kill: () => void) => t.after(kill);
  const results = await Promise.all([
    runWorker([sr, "a-", "11", shared.key, String(DURATION_MS)], track),
    runWorker([sr, "b-", "22", shared.key, String(DURATION_MS)], track),
  ]);
  for (const result of results) {
    assert.equal(result.code, 0, `worker failed: ${result.stdout}\n${result.stderr}`);
    const summary = JSON.parse(result.stdout) as { counts: Record<string, number>; sharedWrites: number; sharedSnapshots: number; wrong: string[] };
    assert.deepEqual(summary.wrong, []);
    assert.ok((summary.counts.write ?? 0) > 20, JSON.stringify(summary));
    t.diagnostic(JSON.stringify(summary));
  }
  assert.deepEqual(checkConsistency(sr), []);
  await collectGarbage(sr);
  assert.deepEqual(checkConsistency(sr, { exactFiles: true }), []);
  const volumes = await listVolumes(sr);
  for (const volume of volumes) await hashVolume(sr, volume.key);
  assert.ok(volumes.some((volume) => volume.name === "shared" && !volume.read_write), "live snapshots of the shared volume were taken");
});
