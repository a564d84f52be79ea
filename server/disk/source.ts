// A disk to write out in some format (GET /export_raw_vdi): its size, which of its 1 MiB blocks the file carries,
// and those blocks' bytes in order. The map is known before any byte is written, so a writer can lay out its
// tables (a VHD's BAT, a qcow2's L1/L2 and refcounts) ahead of the data and say its length.
import { XVA_BLOCK_SIZE } from "../xva/format.ts";

/** The unit a source carries: 1 MiB, an XVA block (the last block of a disk may be short). */
export const SOURCE_BLOCK = XVA_BLOCK_SIZE;

export interface DiskSource {
  virtualSize: number;
  /**
   * Whether block `index` (of SOURCE_BLOCK bytes) is carried: it holds data, or, in a delta, differs from the
   * base. What is not carried reads as zeros (a full disk), or as the base does (a delta).
   */
  carried(index: number): boolean;
  /** The carried blocks' bytes, in index order, each read once. A carried block may still read all zeros. */
  blocks(): AsyncIterable<{ index: number; data: Buffer }>;
}

/** A source over a disk held in memory, carrying the blocks `carried` names (by default those not all zeros): for tests. */
export function bufferSource(disk: Buffer, carried?: (index: number) => boolean): DiskSource {
  const isCarried = carried ?? ((index: number) => disk.subarray(index * SOURCE_BLOCK, (index + 1) * SOURCE_BLOCK).some((byte) => byte !== 0));
  return {
    virtualSize: disk.length,
    carried: isCarried,
    async *blocks() {
      for (let index = 0; index * SOURCE_BLOCK < disk.length; index++) if (isCarried(index)) yield { index, data: disk.subarray(index * SOURCE_BLOCK, (index + 1) * SOURCE_BLOCK) };
    },
  };
}

/** The source's block map, each block asked once: 1 where carried. A writer lays out its tables from it. */
export function carriedMap(source: DiskSource): Uint8Array {
  const map = new Uint8Array(Math.ceil(source.virtualSize / SOURCE_BLOCK));
  for (let index = 0; index < map.length; index++) if (source.carried(index)) map[index] = 1;
  return map;
}

/** The bytes block `index` of a disk of `virtualSize` holds: a source block's, fewer for the last. */
export function sourceBlockLength(index: number, virtualSize: number): number {
  return Math.min(SOURCE_BLOCK, virtualSize - index * SOURCE_BLOCK);
}

/**
 * The carried blocks' bytes, taken in index order by a writer whose layout came from `map`: a block the source
 * yields that the map does not carry, out of order or of the wrong size, and one it leaves out, are refused in words.
 */
export class CarriedBlocks {
  readonly #blocks: AsyncIterator<{ index: number; data: Buffer }>;
  readonly #map: Uint8Array;
  readonly #virtualSize: number;
  #last = -1;

  constructor(source: DiskSource, map: Uint8Array) {
    this.#blocks = source.blocks()[Symbol.asyncIterator]();
    this.#map = map;
    this.#virtualSize = source.virtualSize;
  }

  /** The bytes of carried block `index`, the next one the map carries. */
  async take(index: number): Promise<Buffer> {
    const step = await this.#blocks.next();
    if (step.done) throw new Error(`the disk source ended before carried block ${index}`);
    const got = this.#check(step.value.index);
    if (got !== index) throw new Error(`the disk source skipped carried block ${index}: it yielded block ${got} next`);
    const expected = sourceBlockLength(index, this.#virtualSize);
    if (step.value.data.length !== expected) throw new Error(`the disk source yielded ${step.value.data.length} bytes for block ${index}, not its ${expected}`);
    return step.value.data;
  }

  /** Every carried block in index order, then the check that nothing follows; the source is let go at the end. */
  async *each(): AsyncGenerator<{ index: number; data: Buffer }> {
    try {
      for (let index = 0; index < this.#map.length; index++) if (this.#map[index] === 1) yield { index, data: await this.take(index) };
      await this.end();
    } finally {
      await this.close();
    }
  }

  /** Checks that the source has nothing after the last carried block. */
  async end(): Promise<void> {
    const step = await this.#blocks.next();
    if (!step.done) throw new Error(`the disk source yielded block ${this.#check(step.value.index)} after the last carried block`);
  }

  /** Lets go of the source (a writer stopped early). */
  async close(): Promise<void> {
    await this.#blocks.return?.();
  }

  #check(index: number): number {
    if (!Number.isInteger(index) || index < 0 || index >= this.#map.length) throw new Error(`the disk source yielded block ${index}, outside the disk's ${this.#map.length} blocks`);
    if (index <= this.#last) throw new Error(`the disk source yielded block ${index} out of order, after block ${this.#last}`);
    if (this.#map[index] !== 1) throw new Error(`the disk source yielded block ${index}, which it does not carry`);
    this.#last = index;
    return index;
  }
}

/** A writer's `bytes`, checked to total exactly the `length` it said before the first byte. */
export async function* ofLength(bytes: AsyncIterable<Buffer>, length: number, format: string): AsyncGenerator<Buffer> {
  let total = 0;
  for await (const piece of bytes) {
    total += piece.length;
    if (total > length) throw new Error(`the ${format} writer passed the ${length} bytes it said`);
    yield piece;
  }
  if (total !== length) throw new Error(`the ${format} writer wrote ${total} bytes, not the ${length} it said`);
}
