// A file read in one pass whose tables (qcow2's L1 and L2, VMDK's grain directory and tables) name where its
// data lies, tables and data in whatever order the file holds them. What the tables name is a target, taken in
// file order from a min-heap; bytes met before any table names them are kept aside in a spill file while tables
// are still unread, never in memory, and taken back once named.
import type { ByteReader } from "./byte-reader.ts";
import { DiskImageError } from "./image.ts";
import { PIECE } from "./runs.ts";
import { Spill } from "./spill.ts";

/** Something a table names: its first byte in the file, and the byte of the entry that named it. */
export interface Target {
  start: number;
  entryAt: number;
}

function fail(message: string, offset?: number): never {
  throw new DiskImageError(message, offset);
}

export class AnyOrder<T extends Target> {
  readonly #reader: ByteReader;
  readonly #spill: Spill;
  readonly #heap: T[] = [];
  readonly #maxPending: number;
  /** Ranges read back from the spill: a second table naming one of them names it twice. */
  readonly #taken = new Set<number>();
  #lastStart = -1;
  /** Tables named and not yet read: while any is, passed bytes may be named later, so they are kept. */
  tablesUnread = 0;

  constructor(reader: ByteReader, options: { spillDir: string; maxPending: number }) {
    this.#reader = reader;
    this.#spill = new Spill(options.spillDir);
    this.#maxPending = options.maxPending;
  }

  /** Names a target; past `maxPending` waiting the file's order cannot be streamed. */
  push(target: T): void {
    const heap = this.#heap;
    if (heap.length >= this.#maxPending) fail(`over ${this.#maxPending} pieces named before their data: this file's order cannot be read as a stream; convert it with qemu-img first`, target.entryAt);
    heap.push(target);
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.start <= heap[i]!.start) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  }

  /** The start of the next target in file order. */
  peekStart(): number | undefined {
    return this.#heap[0]?.start;
  }

  /** The next target in file order; two targets at one byte fail. */
  next(): T | undefined {
    const heap = this.#heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last !== undefined) {
      heap[0] = last;
      for (let i = 0; ; ) {
        const left = 2 * i + 1;
        const right = left + 1;
        let least = i;
        if (left < heap.length && heap[left]!.start < heap[least]!.start) least = left;
        if (right < heap.length && heap[right]!.start < heap[least]!.start) least = right;
        if (least === i) break;
        [heap[least], heap[i]] = [heap[i]!, heap[least]!];
        i = least;
      }
    }
    if (top !== undefined) {
      if (top.start === this.#lastStart) fail(`two tables name the bytes at ${top.start}`, top.entryAt);
      this.#lastStart = top.start;
    }
    return top;
  }

  /** Exactly `length` bytes from `start`: from the stream when ahead, else from those kept aside. */
  async bytes(start: number, length: number, what: string, entryAt: number): Promise<Buffer> {
    if (start >= this.#reader.position) {
      await this.passTo(start);
      return this.#reader.read(length, what);
    }
    const kept = this.#taken.has(start) ? undefined : await this.#spill.take(start, length);
    if (kept === undefined) fail(`${what} at byte ${start} overlaps bytes already read as something else`, entryAt);
    this.#taken.add(start);
    return kept;
  }

  /**
   * Up to `end` from `start`, fewer at the end of the file (at least one byte): a range that may share its last
   * sector with the next target (qcow2's compressed clusters). Kept aside too while tables are unread, as one
   * still to come may name something that starts inside it.
   */
  async bytesUpTo(start: number, end: number, what: string, entryAt: number): Promise<Buffer> {
    if (start < this.#reader.position) return (await this.#spill.take(start, end - start, { partial: true })) ?? fail(`${what} at byte ${start} overlaps bytes already read as something else`, entryAt);
    await this.passTo(start);
    const bytes = await this.#reader.readUpTo(end - start);
    if (bytes.length === 0) fail(`the file ends before ${what}`, start);
    if (this.tablesUnread > 0) await this.#spill.keep(start, bytes);
    return bytes;
  }

  /** Moves the stream to `offset`: what lies before is kept aside while tables are unread, else passed over. */
  async passTo(offset: number): Promise<void> {
    const reader = this.#reader;
    while (reader.position < offset) {
      if (this.tablesUnread === 0) return reader.skipTo(offset, "the next piece the tables name");
      const at = reader.position;
      const piece = await reader.readUpTo(Math.min(PIECE, offset - at));
      if (piece.length === 0) fail("the file ends before the next piece the tables name", at);
      await this.#spill.keep(at, piece);
    }
  }

  /** Reads and passes over what follows the last target, up to the file's `length` when it is known. */
  async finish(length: number | undefined): Promise<void> {
    const reader = this.#reader;
    while ((await reader.readUpTo(PIECE)).length > 0) if (length !== undefined && reader.position > length) fail(`the body goes on past the file's ${length} bytes`, length);
  }

  /** Removes what was kept aside. */
  close(): Promise<void> {
    return this.#spill.close();
  }
}
