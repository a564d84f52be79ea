// The worker threads that compress export chunks (compression-worker.ts), one per core, shared by all the
// exports running: a chunk is compressed whole on one of them, synchronously, so no output piece waits for the
// main thread's loop (with node:zlib's async form on libuv's pool every 128 KiB piece did: a busy main thread
// held the compressors up, zstd export at 0.4× of `zstd -T0`). They start with the first chunk and stop after
// a while without work, giving their memory back.
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { CompressJob, CompressResult } from "./compression-worker.ts";

const IDLE_MS = 30_000;

type Pending = { resolve: (result: { pieces: Buffer[]; data: Buffer }) => void; reject: (error: Error) => void };
type Thread = { worker: Worker; pending: Map<number, Pending> };

const threads: Thread[] = [];
let nextId = 0;
let idleTimer: NodeJS.Timeout | null = null;

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

function startThread(): Thread {
  // The process's options (--cpu-prof for the benches), but not --input-type (a script run with -e): a worker
  // file may not have it.
  const inputType = process.execArgv.some((option) => option.startsWith("--input-type"));
  const execArgv = inputType ? process.execArgv.filter((option) => !option.startsWith("--input-type")) : undefined;
  const worker = new Worker(new URL("./compression-worker.ts", import.meta.url), { execArgv });
  const thread: Thread = { worker, pending: new Map() };
  worker.on("message", (result: CompressResult) => {
    const pending = thread.pending.get(result.id);
    thread.pending.delete(result.id);
    settled(thread);
    if (pending === undefined) return;
    if ("error" in result) pending.reject(new Error(result.error));
    else pending.resolve({ pieces: result.pieces.map(asBuffer), data: asBuffer(result.data) });
  });
  const failed = (error: Error) => {
    const at = threads.indexOf(thread);
    if (at >= 0) threads.splice(at, 1);
    for (const pending of thread.pending.values()) pending.reject(error);
    thread.pending.clear();
  };
  worker.on("error", failed);
  worker.on("exit", (code) => failed(new Error(`the compression thread stopped (exit code ${code})`)));
  threads.push(thread);
  return thread;
}

/** A thread with nothing to do no longer keeps the process alive; when none has, all stop after IDLE_MS. */
function settled(thread: Thread) {
  if (thread.pending.size > 0) return;
  thread.worker.unref();
  if (threads.some((t) => t.pending.size > 0)) return;
  idleTimer = setTimeout(() => {
    idleTimer = null;
    for (const t of threads.splice(0)) void t.worker.terminate();
  }, IDLE_MS).unref();
}

/**
 * `data` compressed as one whole gzip member or zstd frame on a worker thread. `data`'s buffer is transferred
 * when it can be (unusable here until it comes back, as `data` of the result, for reuse); the output comes in
 * pieces of at most 128 KiB. Chunks go to the thread with the fewest waiting, a new one while fewer than the cores run.
 */
export function compressOnPool(kind: CompressJob["kind"], level: number, data: Uint8Array): Promise<{ pieces: Buffer[]; data: Buffer }> {
  if (idleTimer !== null) clearTimeout(idleTimer);
  idleTimer = null;
  let thread = threads.reduce<Thread | undefined>((best, t) => (best === undefined || t.pending.size < best.pending.size ? t : best), undefined);
  if (thread === undefined || (thread.pending.size > 0 && threads.length < availableParallelism())) thread = startThread();
  const id = nextId++;
  const job: CompressJob = { id, kind, level, data };
  const { promise, resolve, reject } = Promise.withResolvers<{ pieces: Buffer[]; data: Buffer }>();
  thread.pending.set(id, { resolve, reject });
  thread.worker.ref();
  try {
    thread.worker.postMessage(job, [data.buffer as ArrayBuffer]);
  } catch {
    // Not transferable (a slice of Node's shared pool of small buffers): copied instead.
    thread.worker.postMessage(job);
  }
  return promise;
}
