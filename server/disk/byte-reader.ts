// A disk image arriving as a stream, read forwards only: exact reads and skips at file offsets, each failure
// naming the byte offset it happened at (a stream that ends early is a truncation there).
import { DiskImageError } from "./image.ts";

export class ByteReader {
  readonly #chunks: AsyncIterator<Uint8Array>;
  #head: Buffer = Buffer.alloc(0);
  #ended = false;
  /** File offset of the next byte read. */
  position = 0;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.#chunks = source[Symbol.asyncIterator]();
  }

  /** Fills the head with at least one byte; false at the end of the stream. */
  async #fill(): Promise<boolean> {
    while (this.#head.length === 0) {
      if (this.#ended) return false;
      const step = await this.#chunks.next();
      if (step.done) {
        this.#ended = true;
        return false;
      }
      this.#head = Buffer.isBuffer(step.value) ? step.value : Buffer.from(step.value.buffer, step.value.byteOffset, step.value.byteLength);
    }
    return true;
  }

  /** Up to `length` bytes (fewer only at the end of the stream), in a buffer of their own, or into `into`'s start. */
  async readUpTo(length: number, into?: Buffer): Promise<Buffer> {
    const out = into ?? Buffer.allocUnsafe(length);
    let filled = 0;
    while (filled < length && (await this.#fill())) {
      const n = Math.min(length - filled, this.#head.length);
      this.#head.copy(out, filled, 0, n);
      this.#head = this.#head.subarray(n);
      filled += n;
    }
    this.position += filled;
    return filled === length ? out : out.subarray(0, filled);
  }

  /** Exactly `length` bytes: `what` is named, with its offset, when the stream ends before them. */
  async read(length: number, what: string): Promise<Buffer> {
    const at = this.position;
    const data = await this.readUpTo(length);
    if (data.length < length) throw new DiskImageError(`the file ends inside ${what} (${data.length} of its ${length} bytes)`, at + data.length);
    return data;
  }

  /**
   * The same, but bytes that lie in one received chunk come as a view of it, not a copy: for a caller that is
   * done with them before it reads again (a grain inflated at once).
   */
  async readView(length: number, what: string): Promise<Buffer> {
    if (!(await this.#fill()) || this.#head.length < length) return this.read(length, what);
    const view = this.#head.subarray(0, length);
    this.#head = this.#head.subarray(length);
    this.position += length;
    return view;
  }

  /** Passes the bytes up to file offset `offset`, which may not lie behind. */
  async skipTo(offset: number, what: string): Promise<void> {
    if (offset < this.position) throw new DiskImageError(`${what} lies at byte ${offset}, before data already read: the file is not in the order a stream can be read in`, this.position);
    while (this.position < offset) {
      if (!(await this.#fill())) throw new DiskImageError(`the file ends before ${what}`, this.position);
      const n = Math.min(offset - this.position, this.#head.length);
      this.#head = this.#head.subarray(n);
      this.position += n;
    }
  }

  /** Up to `length` of the next bytes (fewer only at the end of the stream), left to be read. */
  async peek(length: number): Promise<Buffer> {
    while (this.#head.length < length && !this.#ended) {
      const step = await this.#chunks.next();
      if (step.done) this.#ended = true;
      else this.#head = Buffer.concat([this.#head, step.value]);
    }
    return this.#head.subarray(0, length);
  }

  /** Whether the stream has no byte left. */
  async atEnd(): Promise<boolean> {
    return !(await this.#fill());
  }

  /** The rest of the stream, as it comes (what was peeked first), for a reader of its own. */
  async *rest(): AsyncGenerator<Buffer> {
    while (await this.#fill()) {
      const chunk = this.#head;
      this.#head = Buffer.alloc(0);
      this.position += chunk.length;
      yield chunk;
    }
  }
}
