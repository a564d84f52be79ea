// Reuses I/O buffers (request payloads and read data). Fresh multi-hundred-KiB allocations cost page
// faults, allocator work and V8 GC pressure on every request; NBD clients use a handful of request
// sizes, so exact-size free lists catch almost all of them.

export class BufferPool {
  readonly #free = new Map<number, Buffer[]>();
  readonly #limit: number;
  #retained = 0;

  /** `limit`: bytes kept idle at most. */
  constructor(limit: number) {
    this.#limit = limit;
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
}
