// A raw disk image: its bytes from disk offset 0, as they come. Zero pieces are runs of zeros, so that holes
// stay holes.
import { isZeroBlock, XVA_BLOCK_SIZE } from "../xva/format.ts";
import type { ByteReader } from "./byte-reader.ts";
import { DiskImageError, type DiskRun } from "./image.ts";

/** The stream's bytes as runs, up to its end; more than `limit` bytes fail where the first byte past it is. */
export async function* readRaw(reader: ByteReader, limit: number): AsyncGenerator<DiskRun> {
  for (;;) {
    const offset = reader.position;
    const piece = await reader.readUpTo(Math.min(XVA_BLOCK_SIZE, limit - offset + 1));
    if (piece.length === 0) return;
    if (offset + piece.length > limit) throw new DiskImageError(`the body goes on past the disk's ${limit} bytes`, limit);
    yield isZeroBlock(piece) ? { offset, zeros: piece.length } : { offset, data: piece };
  }
}
