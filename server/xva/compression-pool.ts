// The worker threads that compress and decompress XVA streams (compression-worker.ts), one per core, shared by
// all the transfers running. Each chunk is worked on whole on one of them, synchronously, so no output piece
// waits for the main thread's loop: with node:zlib's async form on libuv's pool every 128 KiB piece did, and a
// busy main thread held the compressors up (zstd export at 0.4× of `zstd -T0`). They start with the first chunk
// and stop after a while without work, giving their memory back.
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { WorkerJob, WorkerResult } from "./compression-worker.ts";

const IDLE_MS = 30_000;

export type Worked = { pieces: Buffer[]; data: Buffer };
type Pending = { resolve: (result: Worked) => void; reject: (error: Error) => void };
type Thread = { worker: Worker; pending: Map<number, Pending>; failure: Error | null };

const threads: Thread[] = [];
let nextId = 0;
let idleTimer: NodeJS.Timeout | null = null;

const asBuffer = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

function startThread(): Thread {
  // The process's options (--cpu-prof for the benches), but not --input-type (a script run with -e): a worker
  // file may not have it.
  const inputType = process.execArgv.some((option) => option.startsWith("--input-type"));
  const execArgv = inputType ? process.execArgv.filter((option) => !option.startsWith("--input-type")) : undefined;
  // Small heaps: a thread holds a few small objects (its data lives outside V8's heap). With V8's defaults for a
  // worker each thread took ~30 MiB of RSS, with any limits set ~14 MiB (measured).
  const resourceLimits = { maxYoungGenerationSizeMb: 16, maxOldGenerationSizeMb: 64 };
  const worker = new Worker(new URL("./compression-worker.ts", import.meta.url), { execArgv, resourceLimits });
  const thread: Thread = { worker, pending: new Map(), failure: null };
  worker.on("message", (result: WorkerResult) => {
    const pending = thread.pending.get(result.id);
    thread.pending.delete(result.id);
    settled(thread);
    if (pending === undefined) return;
    if ("error" in result) pending.reject(new Error(result.error));
    else pending.resolve({ pieces: result.pieces.map(asBuffer), data: asBuffer(result.data) });
  });
  const failed = (error: Error) => {
    thread.failure ??= error;
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
  if (threads.some((t) => t.pending.size > 0) || decompressions > 0) return;
  idleTimer = setTimeout(() => {
    idleTimer = null;
    for (const t of threads.splice(0)) void t.worker.terminate();
  }, IDLE_MS).unref();
}

/** The thread with the fewest chunks waiting; a new one while some are busy and fewer than the cores run. */
function pick(): Thread {
  if (idleTimer !== null) clearTimeout(idleTimer);
  idleTimer = null;
  const thread = threads.reduce<Thread | undefined>((best, t) => (best === undefined || t.pending.size < best.pending.size ? t : best), undefined);
  if (thread === undefined || (thread.pending.size > 0 && threads.length < availableParallelism())) return startThread();
  return thread;
}

/** Sends `job` to `thread`; its `data` buffer is transferred when it can be (unusable here until it comes back). */
function send(thread: Thread, job: WorkerJob & { id: number; data: Uint8Array }): Promise<Worked> {
  if (thread.failure !== null) return Promise.reject(thread.failure);
  const { promise, resolve, reject } = Promise.withResolvers<Worked>();
  thread.pending.set(job.id, { resolve, reject });
  thread.worker.ref();
  try {
    thread.worker.postMessage(job, [job.data.buffer as ArrayBuffer]);
  } catch {
    // Not transferable (a slice of Node's shared pool of small buffers): copied instead.
    thread.worker.postMessage(job);
  }
  return promise;
}

/**
 * `data` compressed as one whole gzip member or zstd frame on a worker thread. `data`'s buffer is transferred
 * when it can be (it comes back as `data` of the result, for reuse); the output comes in pieces of at most
 * 128 KiB.
 */
export function compressOnPool(kind: "gzip" | "zstd", level: number, data: Uint8Array): Promise<Worked> {
  return send(pick(), { op: "compress", id: nextId++, kind, level, data });
}

let decompressions = 0;

/**
 * A decompression of one stream, on one thread for its whole life (its context lives there). `write` each chunk
 * in order, the last with `end`; `drop` when abandoned. Chunks as compressOnPool's.
 */
export function openDecompression(kind: "gzip" | "zstd"): { write(data: Uint8Array, end: boolean): Promise<Worked>; drop(): void } {
  const thread = pick();
  const stream = nextId++;
  let open = true;
  decompressions++;
  const close = () => {
    if (!open) return;
    open = false;
    decompressions--;
    settled(thread);
  };
  return {
    write(data, end) {
      const worked = send(thread, { op: "decompress", id: nextId++, stream, kind, data, end });
      if (end) close();
      return worked;
    },
    drop() {
      if (!open) return;
      close();
      if (thread.failure === null) thread.worker.postMessage({ op: "drop", stream } satisfies WorkerJob);
    },
  };
}
