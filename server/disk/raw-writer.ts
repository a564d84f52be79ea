// A disk written out raw (every byte, what is not carried as zeros), or in xapi's chunked framing (vhd-tool's
// chunked.ml, read back by ./chunked.ts): a 12-byte little-endian header {offset u64, length u32} and the bytes of
// each carried block, then an all-zero header. Raw is for a whole disk; chunked carries a delta too, since what no
// frame writes is left as the target holds it.
import { CarriedBlocks, carriedMap, type DiskSource, SOURCE_BLOCK, sourceBlockLength } from "./source.ts";

const FRAME_HEADER = 12;
/** Handed out for every block not carried, never written to. */
const ZEROS = Buffer.alloc(SOURCE_BLOCK);

/** The disk's `virtualSize` bytes in order, blocks not carried as zeros (nothing read for them). */
export async function* writeRaw(source: DiskSource): AsyncGenerator<Buffer> {
  const map = carriedMap(source);
  const blocks = new CarriedBlocks(source, map);
  try {
    for (let index = 0; index < map.length; index++) yield map[index] === 1 ? await blocks.take(index) : ZEROS.subarray(0, sourceBlockLength(index, source.virtualSize));
    await blocks.end();
  } finally {
    await blocks.close();
  }
}

/** The carried blocks as chunked frames, in disk order, and the end header. */
export async function* writeChunked(source: DiskSource): AsyncGenerator<Buffer> {
  for await (const { index, data } of new CarriedBlocks(source, carriedMap(source)).each()) {
    const header = Buffer.alloc(FRAME_HEADER);
    header.writeBigUInt64LE(BigInt(index * SOURCE_BLOCK), 0);
    header.writeUInt32LE(data.length, 8);
    yield header;
    yield data;
  }
  yield Buffer.alloc(FRAME_HEADER);
}

/** The length of writeChunked's output, from the block map alone (for a Content-Length). */
export function chunkedLength(source: DiskSource): number {
  const map = carriedMap(source);
  let length = FRAME_HEADER;
  for (let index = 0; index < map.length; index++) if (map[index] === 1) length += FRAME_HEADER + sourceBlockLength(index, source.virtualSize);
  return length;
}
