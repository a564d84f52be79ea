// The do-nothing peer of a compressed export: a bare Node process that compresses the saved uncompressed export
// with node:zlib alone (the library the service compresses with), one synchronous call per 2 MiB piece in as
// many worker threads as there are cores, output thrown away. No server, no datapath, no tar, no streams: the
// library at its best on this machine. Node's libzstd (as Node builds it) takes more CPU per byte than Debian's
// zstd CLI, so the CLI's speed is out of reach of any Node process that compresses in-process; this row says by
// how much, measured in the same run.
import { endedChildrenCpuSeconds, runCommand } from "../processes.ts";
import type { Compression } from "./transfer.ts";

const SCRIPT = `
const { openSync, readSync } = require("node:fs");
const { availableParallelism } = require("node:os");
const { Worker } = require("node:worker_threads");
const [kind, path] = process.argv.slice(1);
const PIECE = 2 * 1024 * 1024;
const WORKER = \`
  const { parentPort } = require("node:worker_threads");
  const zlib = require("node:zlib");
  const zstd = { params: { [zlib.constants.ZSTD_c_compressionLevel]: 3, [zlib.constants.ZSTD_c_checksumFlag]: 1 } };
  parentPort.on("message", ({ kind, data }) => {
    const out = kind === "zstd" ? zlib.zstdCompressSync(data, zstd) : zlib.gzipSync(data, { level: 1, memLevel: 9 });
    parentPort.postMessage({ size: out.byteLength, data }, [data.buffer]);
  });\`;
const fd = openSync(path, "r");
const workers = Array.from({ length: availableParallelism() }, () => new Worker(WORKER, { eval: true }));
let done = false;
let busy = 0;
function feed(worker, data) {
  data ??= new Uint8Array(PIECE);
  const got = done ? 0 : readSync(fd, data, 0, PIECE, null);
  if (got === 0) {
    done = true;
    if (busy === 0) for (const w of workers) void w.terminate();
    return;
  }
  busy++;
  worker.postMessage({ kind, data: data.subarray(0, got) }, [data.buffer]);
}
for (const worker of workers) {
  worker.on("message", ({ data }) => {
    busy--;
    feed(worker, new Uint8Array(data.buffer));
  });
  // Two pieces per worker: one compressing, one waiting, so a worker never waits for the reader.
  feed(worker);
  feed(worker);
}
`;

/** node:zlib compressing `input` on all cores (a process of its own): wall and CPU seconds (its rusage). */
export async function libraryPeer(compression: Exclude<Compression, "none">, input: string): Promise<{ seconds: number; cpu: number }> {
  const cpuBefore = endedChildrenCpuSeconds();
  const { seconds } = await runCommand(process.execPath, ["-e", SCRIPT, compression, input], { timeoutMs: 15 * 60_000 });
  return { seconds, cpu: endedChildrenCpuSeconds() - cpuBefore };
}
