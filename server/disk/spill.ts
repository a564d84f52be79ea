// Bytes of a stream kept aside in a file until they are known to be wanted: a reader that meets data before the
// table saying where it belongs (a qcow2 cluster ahead of its L2 table) spills it here, by its offset in the
// stream, and reads it back once mapped. Ranges are written in stream order, so they are found by binary search.
import { type FileHandle, mkdtemp, open, rm } from "node:fs/promises";
import { join } from "node:path";

export class Spill {
  readonly #dir: string;
  #file: FileHandle | undefined;
  #dirMade: string | undefined;
  /** [stream offset, length, offset in the file], in stream order. */
  readonly #ranges: Array<[number, number, number]> = [];
  #size = 0;

  constructor(dir: string) {
    this.#dir = dir;
  }

  /** Bytes kept aside so far. */
  get size(): number {
    return this.#size;
  }

  /** Keeps `data`, which is the stream's bytes from `at` (after any range kept before). */
  async keep(at: number, data: Buffer): Promise<void> {
    if (data.length === 0) return;
    if (this.#file === undefined) {
      this.#dirMade = await mkdtemp(join(this.#dir, "hangar-spill-"));
      this.#file = await open(join(this.#dirMade, "spill"), "w+");
    }
    await this.#file.write(data, 0, data.length, this.#size);
    this.#ranges.push([at, data.length, this.#size]);
    this.#size += data.length;
  }

  /**
   * The stream's bytes [at, at+length) when they were all kept, else undefined; with `partial`, as many of them
   * as were kept from `at` on (undefined when not even the first was).
   */
  async take(at: number, length: number, options: { partial?: boolean } = {}): Promise<Buffer | undefined> {
    const out = Buffer.alloc(length);
    let filled = 0;
    let index = this.#find(at);
    while (filled < length && index < this.#ranges.length) {
      const [start, size, fileAt] = this.#ranges[index]!;
      const from = at + filled;
      if (start > from) break;
      const n = Math.min(length - filled, start + size - from);
      if (n <= 0) break;
      await this.#file!.read(out, filled, n, fileAt + (from - start));
      filled += n;
      index++;
    }
    if (filled === length) return out;
    return options.partial === true && filled > 0 ? out.subarray(0, filled) : undefined;
  }

  /** The index of the last range starting at or before `at` (0 when none does). */
  #find(at: number): number {
    let low = 0;
    let high = this.#ranges.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (this.#ranges[mid]![0] <= at) low = mid;
      else high = mid - 1;
    }
    return low;
  }

  /** Removes the file. */
  async close(): Promise<void> {
    await this.#file?.close().catch(() => undefined);
    if (this.#dirMade !== undefined) await rm(this.#dirMade, { recursive: true, force: true });
    this.#file = undefined;
    this.#dirMade = undefined;
  }
}
