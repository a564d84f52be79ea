// A compression worker thread (server/xva/compression-pool.ts): each message is one chunk, compressed at once into
// one whole gzip member or zstd frame, synchronously, with a context kept per kind and level for the worker's
// life. The chunk's buffer goes back with the output, for the next chunk.
import { parentPort } from "node:worker_threads";
import zlib from "node:zlib";

/**
 * Output pieces: each piece is transferred to the main thread as the ArrayBuffer it is. Below bin/hangar's
 * MALLOC_MMAP_THRESHOLD_ (256 KiB) they come from malloc's arenas; at 256 KiB and above each would be a fresh
 * mapping, faulted in page by page.
 */
const OUTPUT_PIECE = 128 * 1024;

/** Made only by the pool (compression-pool.ts), which checked the options: not a trust boundary. */
export type CompressJob = { id: number; kind: "gzip" | "zstd"; level: number; data: Uint8Array };
export type CompressResult = { id: number; data: Uint8Array } & ({ pieces: Uint8Array[] } | { error: string });

/**
 * node:zlib has no public synchronous call that keeps its context: zlib.zstdCompressSync and zlib.gzipSync make
 * and free one per call (3.5 MiB for zstd at level 3: mapped and faulted in again for every 2 MiB chunk,
 * 9.6 against 5.0 CPU-s per GiB, measured), and the async stream needs this thread's loop for every output
 * piece. So the stream's own native handle is driven synchronously, as zlib.gzipSync drives it inside Node
 * (`_handle.writeSync`, its results in `_writeState`: output space left, input left). Node is pinned (24); the
 * shape is checked before the first use, and the tests run through here.
 */
type Handle = { writeSync(flush: number, input: Uint8Array, inOffset: number, inLength: number, output: Uint8Array, outOffset: number, outLength: number): void };
type Context = { stream: zlib.Gzip | zlib.ZstdCompress; handle: Handle; state: Uint32Array; end: number };

const contexts = new Map<string, Context>();

function context(kind: "gzip" | "zstd", level: number): Context {
  const key = `${kind}:${level}`;
  let found = contexts.get(key);
  if (found !== undefined) return found;
  const stream =
    kind === "gzip"
      ? // memLevel 9: level 1 deflate runs ~12% faster with the bigger hash, output ~0.2% larger.
        zlib.createGzip({ level, memLevel: 9 })
      : // Frames carry the content checksum, as the zstd CLI writes by default.
        zlib.createZstdCompress({ params: { [zlib.constants.ZSTD_c_compressionLevel]: level, [zlib.constants.ZSTD_c_checksumFlag]: 1 } });
  // A failure inside writeSync destroys the stream (read below, after the call); its error event needs a listener.
  stream.on("error", () => undefined);
  const inner = stream as unknown as { _handle?: Partial<Handle>; _writeState?: unknown };
  if (typeof inner._handle?.writeSync !== "function" || !(inner._writeState instanceof Uint32Array)) throw new Error(`this Node (${process.version}) has no synchronous ${kind} handle`);
  found = { stream, handle: inner._handle as Handle, state: inner._writeState, end: kind === "gzip" ? zlib.constants.Z_FINISH : zlib.constants.ZSTD_e_end };
  contexts.set(key, found);
  return found;
}

/** `data` as one whole gzip member or zstd frame, in pieces of at most OUTPUT_PIECE bytes each with a buffer of its own. */
export function compressChunk(kind: "gzip" | "zstd", level: number, data: Uint8Array): Uint8Array[] {
  const { stream, handle, state, end } = context(kind, level);
  const pieces: Uint8Array[] = [];
  let inOffset = 0;
  let inLength = data.byteLength;
  for (;;) {
    const out = Buffer.allocUnsafeSlow(OUTPUT_PIECE);
    handle.writeSync(end, data, inOffset, inLength, out, 0, OUTPUT_PIECE);
    if (stream.destroyed) throw stream.errored ?? new Error(`the ${kind} context failed`);
    const [outLeft, inLeft] = [state[0]!, state[1]!];
    inOffset += inLength - inLeft;
    inLength = inLeft;
    if (outLeft < OUTPUT_PIECE) pieces.push(out.subarray(0, OUTPUT_PIECE - outLeft));
    // Output space left over: the member or frame is whole.
    if (outLeft > 0) break;
  }
  // A finished deflate stream takes no more input until reset (which keeps its memory); zstd starts the next
  // frame by itself.
  if (kind === "gzip") (stream as zlib.Gzip & zlib.ZlibReset).reset();
  return pieces;
}

if (parentPort !== null) {
  const port = parentPort;
  port.on("message", (job: CompressJob) => {
    let result: CompressResult;
    try {
      result = { id: job.id, data: job.data, pieces: compressChunk(job.kind, job.level, job.data) };
    } catch (error) {
      // A failed context may hold anything: the next chunk gets a new one.
      contexts.delete(`${job.kind}:${job.level}`);
      result = { id: job.id, data: job.data, error: (error as Error).message };
    }
    const transfer = "pieces" in result ? result.pieces.map((piece) => piece.buffer as ArrayBuffer) : [];
    port.postMessage(result, [...transfer, job.data.buffer as ArrayBuffer]);
  });
}
