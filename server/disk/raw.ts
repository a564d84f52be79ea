// A raw disk image: its bytes from disk offset 0, as they come. Zero pieces are runs of zeros, so that holes
// stay holes.
import { isZeroBlock, XVA_BLOCK_SIZE } from "../xva/format.ts";
import type { ByteReader } from "./byte-reader.ts";
import { DiskImageError, type DiskRun } from "./image.ts";

/** Where the pieces are read into: a pool's buffers of XVA_BLOCK_SIZE, a zero piece's given back at once. */
export interface PieceBuffers {
  take(): Buffer;
  give(piece: Buffer): void;
}

const fresh: PieceBuffers = { take: () => Buffer.allocUnsafe(XVA_BLOCK_SIZE), give: () => {} };

/** The stream's bytes as runs, up to its end; more than `limit` bytes fail where the first byte past it is. */
export async function* readRaw(reader: ByteReader, limit: number, buffers: PieceBuffers = fresh): AsyncGenerator<DiskRun> {
  for (;;) {
    const offset = reader.position;
    const buffer = buffers.take();
    const piece = await reader.readUpTo(Math.min(XVA_BLOCK_SIZE, limit - offset + 1), buffer);
    if (piece.length === 0) return buffers.give(buffer);
    if (offset + piece.length > limit) throw new DiskImageError(`the body goes on past the disk's ${limit} bytes`, limit);
    if (!isZeroBlock(piece)) yield { offset, data: piece };
    else {
      buffers.give(buffer);
      yield { offset, zeros: piece.length };
    }
  }
}
