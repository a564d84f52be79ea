// Whole-stream compression of XVA archives for /export and /import (compat-notes §2): gzip or zstd, detected
// on import by the first bytes. Export compresses on all cores, as `pigz` and `zstd -T0` do: the stream is cut
// into chunks, each becomes an independent gzip member or zstd frame on a worker thread (compression-pool.ts),
// and the members are written in input order; their concatenation is one valid stream for gzip/pigz/zstd -d and
// node:zlib.
import { availableParallelism } from "node:os";
import { PassThrough, Readable, Transform, type TransformCallback } from "node:stream";
import { z } from "zod";
import { compressOnPool, openDecompression, type Worked } from "./compression-pool.ts";

export type Compression = "gzip" | "zstd";

const MiB = 1024 * 1024;
const DEFAULT_CHUNK_SIZE = 2 * MiB;
const DEFAULT_LEVEL: Record<Compression, number> = { gzip: 1, zstd: 3 };
/** Compressed input sent to the decompressing thread at a time: one working, one queued behind it. */
const DECOMPRESSION_CHUNK = 512 * 1024;

// ---- Compression ----

const levelRange: Record<Compression, [number, number]> = { gzip: [0, 9], zstd: [-131072, 22] };

const compressorSchema = z
  .object({
    kind: z.enum(["gzip", "zstd"]),
    level: z.number().int().optional(),
    threads: z.number().int().min(1).max(256).optional(),
    chunkSize: z.number().int().min(1024).max(256 * MiB).optional(),
  })
  .refine((o) => o.level === undefined || (o.level >= levelRange[o.kind][0] && o.level <= levelRange[o.kind][1]), { message: "level out of range for this compression", path: ["level"] });

/** What a chunked stream (below) does with each chunk: `work` it on a thread, and `finish` after the last. */
type ChunkWork = {
  /** `data`'s output; `data`'s buffer comes back (it may travel to a thread and back) for the next chunk. */
  work(data: Uint8Array): Promise<Worked>;
  /** Output to add after every chunk's, given how many chunks there were. */
  finish(chunks: number): Promise<Buffer[]>;
  /** The stream was destroyed: chunks in flight are dropped when they come back. */
  abandon(): void;
  /** How a failure of `work` or `finish` reads to the stream's reader. */
  failure(error: Error): Error;
};

/**
 * The engine of the compressor and the decompressor: a Transform that copies its input into chunks of
 * `chunkSize`, works at most `limit` of them at once and pushes their outputs strictly in input order. Input is
 * copied into the chunks: `consumed` hears of each written buffer once it has been copied whole, for reuse. A
 * consumer that stops reading stops the producer (backpressure): memory stays flat.
 */
function chunkedStream(chunkSize: number, limit: number, chunk: ChunkWork, consumed?: (chunk: Buffer) => void): Transform {
  let current: Buffer | null = null; // the chunk being filled
  let filled = 0;
  let input: Buffer | null = null; // the written chunk not yet copied, held while the in-flight limit is reached
  let inputOffset = 0;
  let inputCallback: TransformCallback | null = null;
  let flushCallback: TransformCallback | null = null;
  let finishing = false;
  let dispatched = 0; // chunks sent to work
  let pushed = 0; // chunks whose output went out, in order
  const finished = new Map<number, Buffer[]>(); // outputs that arrived ahead of an earlier chunk's
  const spare: Buffer[] = []; // chunk buffers whose work is done, reused rather than allocated again
  let stopped = false;

  const fail = (error: Error) => {
    if (!stopped) stream.destroy(chunk.failure(error));
  };

  function dispatch() {
    const data = filled === chunkSize ? current! : new Uint8Array(current!.buffer, current!.byteOffset, filled);
    const seq = dispatched++;
    current = null;
    filled = 0;
    chunk.work(data).then(({ pieces, data: back }) => {
      if (stopped) return;
      if (back.byteLength === chunkSize && spare.length < limit) spare.push(back);
      finished.set(seq, pieces);
      for (let next = finished.get(pushed); next !== undefined; next = finished.get(pushed)) {
        finished.delete(pushed++);
        for (const piece of next) stream.push(piece);
      }
      pump();
    }, fail);
  }

  // Copies held input into chunks and sends each full one while fewer than `limit` are in flight; called again
  // whenever a chunk's output goes out. Releasing a callback is its last act: the stream may re-enter it.
  function pump() {
    if (stopped) return;
    for (;;) {
      if (filled === chunkSize) {
        if (dispatched - pushed >= limit) return;
        dispatch();
      }
      if (input === null) break;
      current ??= spare.pop() ?? Buffer.allocUnsafeSlow(chunkSize);
      const n = Math.min(input.byteLength - inputOffset, chunkSize - filled);
      input.copy(current, filled, inputOffset, inputOffset + n);
      filled += n;
      inputOffset += n;
      if (inputOffset === input.byteLength) {
        const callback = inputCallback!;
        consumed?.(input);
        input = null;
        inputCallback = null;
        if (filled === chunkSize && dispatched - pushed < limit) dispatch();
        callback();
        return;
      }
    }
    if (flushCallback === null || finishing) return;
    if (filled > 0) {
      if (dispatched - pushed >= limit) return;
      dispatch();
    }
    if (pushed < dispatched) return;
    finishing = true;
    chunk.finish(dispatched).then((pieces) => {
      if (stopped) return;
      for (const piece of pieces) stream.push(piece);
      const callback = flushCallback!;
      flushCallback = null;
      callback();
    }, fail);
  }

  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (!Buffer.isBuffer(chunk)) chunk = Buffer.from((chunk as Uint8Array).buffer, (chunk as Uint8Array).byteOffset, (chunk as Uint8Array).byteLength);
      if (chunk.byteLength === 0) return void callback();
      input = chunk;
      inputOffset = 0;
      inputCallback = callback;
      pump();
    },
    flush(callback) {
      flushCallback = callback;
      pump();
    },
    destroy(error, callback) {
      // Chunks already on a thread finish there and are dropped; nothing else is held.
      stopped = true;
      chunk.abandon();
      finished.clear();
      spare.length = 0;
      current = input = null;
      inputCallback = flushCallback = null;
      callback(error);
    },
  });
  return stream;
}

/** A Transform that compresses on all cores: input is cut into chunks (default 2 MiB: measured as fast as 4 MiB, with less memory in flight), each compressed independently on a worker thread (gzip members / zstd frames: their concatenation is one valid stream, as pigz/zstd -d read it), output strictly in input order. `consumed` hears of each written buffer once it has been copied, for reuse. At most 2×threads chunks in flight (one compressing, one queued behind it, so a core never waits for the main thread). */
export function createParallelCompressor(kind: Compression, options?: { level?: number; threads?: number; chunkSize?: number; consumed?: (chunk: Buffer) => void }): Transform {
  const { consumed, ...rest } = options ?? {};
  const parsed = compressorSchema.parse({ kind, ...rest });
  const level = parsed.level ?? DEFAULT_LEVEL[kind];
  const threads = parsed.threads ?? availableParallelism();
  return chunkedStream(
    parsed.chunkSize ?? DEFAULT_CHUNK_SIZE,
    2 * threads,
    {
      work: (data) => compressOnPool(kind, level, data),
      // No input at all: still one valid (empty) member or frame, as `gzip </dev/null` writes.
      finish: async (chunks) => (chunks > 0 ? [] : (await compressOnPool(kind, level, new Uint8Array(new ArrayBuffer(0)))).pieces),
      abandon: () => undefined,
      failure: (error) => new Error(`${kind} compression failed: ${error.message}`, { cause: error }),
    },
    consumed,
  );
}

// ---- Detection and decompression ----

/** What the first bytes say: 1F 8B → gzip, 28 B5 2F FD → zstd, else null (plain). */
export function sniffCompression(head: Uint8Array): Compression | null {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return "gzip";
  if (head.length >= 4 && head[0] === 0x28 && head[1] === 0xb5 && head[2] === 0x2f && head[3] === 0xfd) return "zstd";
  return null;
}

const readableSchema = z.custom<Readable>((v) => v instanceof Readable || (v !== null && typeof v === "object" && typeof (v as Readable).read === "function" && typeof (v as Readable).unshift === "function"), "a Readable stream");

/** Reads at least `n` bytes (fewer at the end of the stream) without consuming them; `ended` when that was all. */
async function peek(source: Readable, n: number): Promise<{ head: Buffer; ended: boolean }> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    if (source.readableEnded) return { head: Buffer.concat(chunks), ended: true };
    // A destroyed source: wait for its close (its error event needs a listener), then fail.
    if (source.closed) throw source.errored ?? new Error("the source was closed before its end");
    const chunk: unknown = source.destroyed ? null : source.read();
    if (chunk !== null) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array);
      chunks.push(bytes);
      total += bytes.byteLength;
      if (total >= n) break;
      continue;
    }
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        source.off("readable", done);
        source.off("end", done);
        source.off("close", done);
        source.off("error", failed);
        resolve();
      };
      const failed = (error: Error) => {
        done();
        reject(error);
      };
      source.on("readable", done);
      source.on("end", done);
      source.on("close", done);
      source.on("error", failed);
    });
  }
  const head = Buffer.concat(chunks);
  source.unshift(head);
  return { head, ended: false };
}

/** Peeks the first bytes of `source` (without losing them) and returns a Readable of the decompressed bytes (node:zlib's gunzip / zstd on a worker thread, concatenated members/frames read as one stream), or the source's bytes unchanged when plain; also answers which compression it found. Errors of the source or the decompressor surface as stream errors with a clear message ("not a valid gzip stream: ..."). A source that fails before its first bytes arrive rejects the promise. */
export async function decompressing(source: Readable): Promise<{ compression: Compression | null; stream: Readable }> {
  readableSchema.parse(source);
  const { head, ended } = await peek(source, 4);
  const compression = sniffCompression(head);
  // A stream that ended within the peek cannot be read again (unshift after end is refused): replay the bytes.
  const input = ended ? Readable.from(head.byteLength > 0 ? [head] : []) : source;
  if (compression === null) return { compression, stream: input };

  // On a worker thread (compression-pool.ts), which keeps the stream's context: the main thread only copies the
  // input into chunks, and no output piece waits for its loop.
  const session = openDecompression(compression);
  const decompressor = chunkedStream(DECOMPRESSION_CHUNK, 2, {
    work: (data) => session.write(data, false),
    finish: async () => (await session.write(new Uint8Array(new ArrayBuffer(0)), true)).pieces,
    abandon: () => session.drop(),
    failure: (error) => error,
  });
  // The caller's stream: the decompressor's errors land here, reworded, and destroying it stops everything.
  const out = new PassThrough();
  let failed = false;
  const fail = (error: Error) => {
    if (failed) return;
    failed = true;
    out.destroy(error);
    decompressor.destroy();
    input.destroy();
  };
  // The source's own failure (a stalled or cancelled upload, a dropped connection) is not the compression's: it
  // passes as it is.
  input.on("error", fail);
  decompressor.on("error", (error) => fail(new Error(`not a valid ${compression} stream: ${error.message}`, { cause: error })));
  out.on("close", () => {
    if (!out.writableFinished) fail(new Error("the decompressed stream was closed before its end"));
  });
  input.pipe(decompressor).pipe(out);
  return { compression, stream: out };
}
