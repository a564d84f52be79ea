// An upload's spool read from byte 0 to its length while tus appends to it: each PATCH wakes the follower,
// which otherwise looks again every FOLLOW_POLL_MS. The bytes go into a request through a ring of reused
// buffers.
import type { Writable } from "node:stream";
import { alignedBuffers, DIRECT_ALIGN, SpoolReader } from "../block-spool.ts";

const READ_CHUNK = 1024 * 1024;
/** Buffers of the spool in flight to the import at once. */
const SEND_RING = 4;
/** How often the follower looks at the spool's size when no PATCH has told it (a fallback; PATCHes notify). */
const FOLLOW_POLL_MS = 250;

export class SpoolFollower {
  readonly #file: string;
  readonly #length: number;
  #wake: (() => void) | undefined;
  /** Since when the follower has had nothing to send (the browser sent nothing more); undefined while bytes flow. */
  #waitingSince: number | undefined;
  readonly #arrivals = new Set<() => void>();

  constructor(file: string, length: number) {
    this.#file = file;
    this.#length = length;
  }

  /** Bytes arrived: look at the spool now. */
  notify(): void {
    this.#wake?.();
    for (const arrived of this.#arrivals) arrived();
    this.#arrivals.clear();
  }

  /** How long the follower has been waiting for the upload's next bytes (0 while they flow). */
  get waitingMs(): number {
    return this.#waitingSince === undefined ? 0 : Date.now() - this.#waitingSince;
  }

  /** Settles when the upload's next bytes arrive (or `signal` aborts). */
  arrival(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const arrived = () => {
        signal.removeEventListener("abort", arrived);
        this.#arrivals.delete(arrived);
        resolve();
      };
      this.#arrivals.add(arrived);
      signal.addEventListener("abort", arrived, { once: true });
    });
  }

  /**
   * The spool into `request`, read into a ring of buffers each reused once the request has written it: a new
   * buffer per read made V8 run a full collection every few MiB (external memory), most of the console's CPU
   * during an upload. Ends the request once all `length` bytes are in it.
   */
  async sendTo(request: Writable, signal: AbortSignal): Promise<void> {
    const ring = alignedBuffers(SEND_RING, READ_CHUNK + DIRECT_ALIGN).map((buffer) => ({ buffer, written: Promise.resolve() }));
    let slot = 0;
    const take = async () => {
      const entry = ring[slot]!;
      await entry.written;
      return entry.buffer;
    };
    for await (const chunk of this.#follow(signal, take)) {
      const entry = ring[slot]!;
      slot = (slot + 1) % SEND_RING;
      entry.written = new Promise((resolve, reject) => request.write(chunk, (error) => (error ? reject(error) : resolve())));
      entry.written.catch(() => undefined);
    }
    request.end();
  }

  /**
   * The spool's bytes from `start` to `end` (the upload's length by default) as they arrive, each in a buffer of
   * its own.
   */
  async *stream(signal: AbortSignal, start = 0, end = this.#length): AsyncGenerator<Buffer> {
    // Read (O_DIRECT) into one aligned buffer, handed on as a copy: the reader may hold a piece as long as it likes.
    const [buffer] = alignedBuffers(1, READ_CHUNK + DIRECT_ALIGN);
    for await (const bytes of this.#follow(signal, async () => buffer!, start, end)) yield Buffer.from(bytes);
  }

  /** The spool's bytes from `start` to `end` (read into `take()`'s buffers), waiting for each PATCH to append more. */
  async *#follow(signal: AbortSignal, take: () => Promise<Buffer>, start = 0, end = this.#length): AsyncGenerator<Buffer> {
    let handle: SpoolReader | undefined;
    let position = start;
    /** The spool's length when last looked at: looked at again only once the bytes before it are sent. */
    let size = 0;
    try {
      while (position < end) {
        signal.throwIfAborted();
        if (handle === undefined) {
          handle = await SpoolReader.open(this.#file).catch((error: NodeJS.ErrnoException) => {
            if (error.code === "ENOENT") return undefined;
            throw error;
          });
        }
        if (handle !== undefined && size <= position) size = await handle.size();
        if (handle !== undefined && size > position) {
          this.#waitingSince = undefined;
          const bytes = await handle.read(await take(), position, Math.min(READ_CHUNK, size - position, end - position));
          position += bytes.length;
          yield bytes;
          continue;
        }
        this.#waitingSince ??= Date.now();
        await this.#nextChange(signal);
      }
    } finally {
      // #waitingSince stays: how long the upload had been paused when an attempt ended is what the pipeline asks.
      await handle?.close();
    }
  }

  #nextChange(signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, FOLLOW_POLL_MS);
      function done() {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      }
      this.#wake = done;
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
