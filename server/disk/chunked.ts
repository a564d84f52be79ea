// xapi's "chunked" raw upload (vhd-tool's chunked.ml; not HTTP chunking): frames of a 12-byte little-endian
// header, {offset: u64, length: u32}, and then `length` bytes to write at `offset` on the disk, in any order;
// a header of all zeros ends the stream. What no frame writes is left as the target holds it, as xapi does.
import { XVA_BLOCK_SIZE } from "../xva/format.ts";
import type { ByteReader } from "./byte-reader.ts";
import { DiskImageError, type DiskRun } from "./image.ts";

const HEADER = 12;

/** The frames as runs, each checked to lie within a disk of `virtualSize` bytes before any of it is read. */
export async function* readChunked(reader: ByteReader, virtualSize: number): AsyncGenerator<DiskRun> {
  for (;;) {
    const at = reader.position;
    const header = await reader.read(HEADER, "a frame header (the stream ends with an all-zero one)");
    const offset = header.readBigUInt64LE(0);
    const length = header.readUInt32LE(8);
    if (offset === 0n && length === 0) return;
    if (offset + BigInt(length) > BigInt(virtualSize)) throw new DiskImageError(`a frame of ${length} bytes at disk offset ${offset} goes past the disk's ${virtualSize} bytes`, at);
    for (let done = 0; done < length; ) {
      const piece = await reader.read(Math.min(XVA_BLOCK_SIZE, length - done), `the ${length} bytes of the frame at disk offset ${offset}`);
      yield { offset: Number(offset) + done, data: piece };
      done += piece.length;
    }
  }
}
