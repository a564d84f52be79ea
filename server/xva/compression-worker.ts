// A compression worker thread (server/xva/compression-pool.ts). Compression: each message is one chunk,
// compressed at once into one whole gzip member or zstd frame, with a context kept per kind and level for the
// worker's life. Decompression: each message is the next chunk of one stream, decompressed with that stream's
// context. Both synchronous; each chunk's buffer goes back with the output, for the next chunk.
import { parentPort } from "node:worker_threads";
import zlib from "node:zlib";
import { ZstdFrameCutter } from "./zstd-frames.ts";

/**
 * Output pieces: each piece is transferred to the main thread as the ArrayBuffer it is. Below bin/hangar's
 * MALLOC_MMAP_THRESHOLD_ (256 KiB) they come from malloc's arenas; at 256 KiB and above each would be a fresh
 * mapping, faulted in page by page.
 */
const OUTPUT_PIECE = 128 * 1024;

type Kind = "gzip" | "zstd";
/** Made only by the pool (compression-pool.ts), which checked the options: not a trust boundary. */
export type WorkerJob =
  | { op: "compress"; id: number; kind: Kind; level: number; data: Uint8Array }
  /** The next chunk of decompression stream `stream` (its context made on its first chunk); `end`: no more after it. */
  | { op: "decompress"; id: number; stream: number; kind: Kind; data: Uint8Array; end: boolean }
  /** Stream `stream` abandoned: its context is freed. */
  | { op: "drop"; stream: number };
export type WorkerResult = { id: number; data: Uint8Array } & ({ pieces: Uint8Array[] } | { error: string });

/**
 * node:zlib has no public synchronous call that keeps its context: zlib.zstdCompressSync and zlib.gzipSync make
 * and free one per call (3.5 MiB for zstd at level 3: mapped and faulted in again for every 2 MiB chunk,
 * 9.6 against 5.0 CPU-s per GiB, measured), and the async stream needs this thread's loop for every output
 * piece. So the stream's own native handle is driven synchronously, as zlib.gzipSync drives it inside Node
 * (`_handle.writeSync`, its results in `_writeState`: output space left, input left). Node is pinned (24); the
 * shape is checked before the first use, and the tests run through here.
 */
type Handle = { writeSync(flush: number, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void };
type Stream = zlib.Gzip | zlib.ZstdCompress | zlib.Gunzip | zlib.ZstdDecompress;
type Context = { stream: Stream; handle: Handle; state: Uint32Array };

function open(stream: Stream, what: string): Context {
  // A failure inside writeSync destroys the stream (read after each call); its error event needs a listener.
  stream.on("error", () => undefined);
  const inner = stream as unknown as { _handle?: Partial<Handle>; _writeState?: unknown };
  if (typeof inner._handle?.writeSync !== "function" || !(inner._writeState instanceof Uint32Array)) throw new Error(`this Node (${process.version}) has no synchronous ${what} handle`);
  return { stream, handle: inner._handle as Handle, state: inner._writeState };
}

/**
 * Writes `data[from, to)` with `flush` until the context takes no more: its output in `pieces`. Answers whether
 * input was left over with output space to spare: the compressed stream ended before its input did.
 */
function write({ stream, handle, state }: Context, flush: number, data: Uint8Array, from: number, to: number, pieces: Uint8Array[]): boolean {
  let inOffset = from;
  let inLength = to - from;
  for (;;) {
    const out = Buffer.allocUnsafeSlow(OUTPUT_PIECE);
    handle.writeSync(flush, data, inOffset, inLength, out, 0, OUTPUT_PIECE);
    if (stream.destroyed) throw stream.errored ?? new Error("the context failed");
    const [outLeft, inLeft] = [state[0]!, state[1]!];
    inOffset += inLength - inLeft;
    inLength = inLeft;
    if (outLeft < OUTPUT_PIECE) pieces.push(out.subarray(0, OUTPUT_PIECE - outLeft));
    if (outLeft > 0) return inLeft > 0;
  }
}

// ---- Compression ----

const compressors = new Map<string, Context>();

/** `data` as one whole gzip member or zstd frame, in pieces of at most OUTPUT_PIECE bytes each with a buffer of its own. */
export function compressChunk(kind: Kind, level: number, data: Uint8Array): Uint8Array[] {
  const key = `${kind}:${level}`;
  let context = compressors.get(key);
  if (context === undefined) {
    context =
      kind === "gzip"
        ? // memLevel 9: level 1 deflate runs ~12% faster with the bigger hash, output ~0.2% larger.
          open(zlib.createGzip({ level, memLevel: 9 }), "gzip")
        : // Frames carry the content checksum, as the zstd CLI writes by default.
          open(zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_compressionLevel]: level, [zlib.constants.ZSTD_c_checksumFlag]: 1 } }), "zstd");
    compressors.set(key, context);
  }
  const pieces: Uint8Array[] = [];
  try {
    write(context, kind === "gzip" ? zlib.constants.Z_FINISH : zlib.constants.ZSTD_e_end, data, 0, data.byteLength, pieces);
  } catch (error) {
    // A failed context may hold anything: the next chunk gets a new one.
    compressors.delete(key);
    throw error;
  }
  // A finished deflate stream takes no more input until reset (which keeps its memory); zstd starts the next
  // frame by itself.
  if (kind === "gzip") (context.stream as zlib.Gzip & zlib.ZlibReset).reset();
  return pieces;
}

// ---- Decompression ----

type Decompressor = { kind: Kind; context: Context; cutter: ZstdFrameCutter | null; ended: boolean };
const decompressors = new Map<number, Decompressor>();

/**
 * The next chunk of stream `stream` decompressed. gzip members follow one another (Node's inflate starts the
 * next member itself); what follows the last one is ignored, as gunzip does. zstd input is written frame by
 * frame (zstd-frames.ts). At `end`, a stream cut short inside a member or frame fails.
 */
export function decompressChunk(stream: number, kind: Kind, data: Uint8Array, end: boolean): Uint8Array[] {
  let decompressor = decompressors.get(stream);
  if (decompressor === undefined) {
    const context = kind === "gzip" ? open(zlib.createGunzip(), "gunzip") : open(zlib.createZstdDecompress(), "zstd decompression");
    decompressor = { kind, context, cutter: kind === "zstd" ? new ZstdFrameCutter() : null, ended: false };
    decompressors.set(stream, decompressor);
  }
  const pieces: Uint8Array[] = [];
  try {
    const flush = kind === "gzip" ? zlib.constants.Z_NO_FLUSH : zlib.constants.ZSTD_e_continue;
    if (decompressor.cutter !== null) {
      let from = 0;
      for (const to of [...decompressor.cutter.cut(data), data.byteLength]) {
        if (to > from) write(decompressor.context, flush, data, from, to, pieces);
        from = to;
      }
      if (end) decompressor.cutter.end();
    } else if (!decompressor.ended) {
      decompressor.ended = write(decompressor.context, flush, data, 0, data.byteLength, pieces);
      if (end && !decompressor.ended) write(decompressor.context, zlib.constants.Z_FINISH, data, data.byteLength, data.byteLength, pieces);
    }
  } catch (error) {
    dropDecompressor(stream);
    throw error;
  }
  if (end) dropDecompressor(stream);
  return pieces;
}

function dropDecompressor(stream: number) {
  decompressors.get(stream)?.context.stream.destroy();
  decompressors.delete(stream);
}

if (parentPort !== null) {
  const port = parentPort;
  port.on("message", (job: WorkerJob) => {
    if (job.op === "drop") return dropDecompressor(job.stream);
    let result: WorkerResult;
    try {
      const pieces = job.op === "compress" ? compressChunk(job.kind, job.level, job.data) : decompressChunk(job.stream, job.kind, job.data, job.end);
      result = { id: job.id, data: job.data, pieces };
    } catch (error) {
      result = { id: job.id, data: job.data, error: (error as Error).message };
    }
    const transfer = "pieces" in result ? result.pieces.map((piece) => piece.buffer as ArrayBuffer) : [];
    port.postMessage(result, [...transfer, job.data.buffer as ArrayBuffer]);
  });
}
