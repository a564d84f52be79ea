// Reuses I/O buffers (request payloads, blocks read or written). A fresh multi-hundred-KiB allocation per
// request or block costs page faults, allocator work and V8 GC pressure: an export that made a new 1 MiB buffer
// per block had V8 collect the whole heap every ~50 MiB, for their external memory alone (21 full collections
// per GiB, measured with a GC observer). Idle buffers wait in exact-size free lists: NBD clients use a handful of
// request sizes, XVA blocks are 1 MiB.

/**
 * Two ways out, sharing the free lists:
 * - take/give: a buffer of exactly the size asked for, given back whole by a caller that knows when it is done
 *   (an NBD request). Untracked, so a buffer never given back is simply collected.
 * - lend/release: the start of a buffer of `lending.size`, whatever length the data has (a disk's short last
 *   block too), for data that travels through streams which may split it: the buffer is free again once the
 *   chunk ending where its data ends is released (parts are released in order). Tracked until then, so at most
 *   `lending.count` are out at once; past that, and for data longer than `lending.size`, plain buffers.
 */
export class BufferPool {
  readonly #free = new Map<number, Buffer[]>();
  readonly #limit: number;
  #retained = 0;
  readonly #lendSize: number;
  readonly #lendCount: number;
  /** Buffers lent, by their memory (which every chunk cut from them shares), with the length of each one's data. */
  readonly #lent = new Map<ArrayBufferLike, { whole: Buffer; length: number }>();

  /** `limit`: bytes kept idle at most. */
  constructor(limit: number, lending: { size: number; count: number } = { size: 0, count: 0 }) {
    this.#limit = limit;
    this.#lendSize = lending.size;
    this.#lendCount = lending.count;
  }

  /** A buffer of exactly `size` bytes with arbitrary contents. */
  take(size: number): Buffer {
    const buffer = this.#free.get(size)?.pop();
    if (buffer === undefined) return Buffer.allocUnsafeSlow(size);
    this.#retained -= size;
    return buffer;
  }

  /** Returns a buffer obtained from take(); the caller must not touch it afterwards. */
  give(buffer: Buffer): void {
    if (buffer.length > this.#limit) return;
    if (this.#retained + buffer.length > this.#limit) {
      // Full, typically of sizes nobody asks for any more (clients vary request sizes): start over.
      this.#free.clear();
      this.#retained = 0;
    }
    let list = this.#free.get(buffer.length);
    if (list === undefined) this.#free.set(buffer.length, (list = []));
    list.push(buffer);
    this.#retained += buffer.length;
  }

  /** `length` bytes with arbitrary contents, to come back through release(). */
  lend(length: number): Buffer {
    if (length > this.#lendSize || this.#lent.size >= this.#lendCount) return Buffer.allocUnsafe(length);
    const whole = this.take(this.#lendSize);
    this.#lent.set(whole.buffer, { whole, length });
    return whole.subarray(0, length);
  }

  /** `chunk` (part of what lend() gave, or any other bytes) is sent or not needed; its buffer is free with the part ending its data. */
  release(chunk: Uint8Array): void {
    const loan = this.#lent.get(chunk.buffer);
    if (loan === undefined || chunk.byteOffset + chunk.byteLength !== loan.length) return;
    this.#lent.delete(chunk.buffer);
    this.give(loan.whole);
  }
}
