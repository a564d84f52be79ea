// Moving a byte range of a volume to a remote NBD export: allocated data as writes, ranges that read as
// zeros as NBD_CMD_WRITE_ZEROES, so holes cost neither reads nor bandwidth. Shared by Data.copy and mirrors.
import { type Extent, STATE_ZERO } from "../../../nbd/backend.ts";
import type { NbdClient } from "../../../nbd/client.ts";
import { BufferPool } from "../../../buffer-pool.ts";
import { FLAG_SEND_FLUSH, FLAG_SEND_WRITE_ZEROES } from "../../../nbd/protocol.ts";

/** What a transfer reads: the volume (already locked by the caller where that matters). */
export interface ExtentReader {
  read(offset: number, target: Buffer): Promise<void>;
  blockStatus(offset: number, length: number): Promise<Extent[]>;
}

/** Largest single read + write. */
const DATA_PIECE = 1024 * 1024;
/** Most bytes of data buffered at once by one copyExtents. */
export const COPY_WINDOW = 8 * 1024 * 1024;
/** Largest zeroing request (NBD lengths are 32-bit). */
const ZERO_PIECE = 1024 * 1024 * 1024;
const ZEROS = Buffer.alloc(DATA_PIECE);
/** Fresh megabyte buffers for every piece would keep the GC busy: they are reused. */
const buffers = new BufferPool(32 * 1024 * 1024);

/**
 * Copies [offset, offset + length) of `source` to the same place of `target`, a batch at a time: the
 * allocation is looked up, then every piece of the batch is read and sent at once so that reads from the
 * volume overlap writes to the remote. A batch holds at most COPY_WINDOW bytes of data (its buffers);
 * holes cost no buffer and go as zeroing requests of any size.
 */
export async function copyExtents(source: ExtentReader, target: NbdClient, offset: number, length: number): Promise<void> {
  const end = offset + length;
  for (let at = offset; at < end; ) {
    const transfers: Promise<void>[] = [];
    const extents = await source.blockStatus(at, end - at);
    const before = at;
    let buffered = 0;
    for (const extent of extents) {
      if (at >= end || buffered >= COPY_WINDOW) break;
      if (!(extent.length > 0)) continue;
      let stop = Math.min(end, at + extent.length);
      if ((extent.flags & STATE_ZERO) !== 0) transfers.push(zeroRange(target, at, stop - at));
      else {
        stop = Math.min(stop, at + COPY_WINDOW - buffered);
        buffered += stop - at;
        transfers.push(copyData(source, target, at, stop - at));
      }
      at = stop;
    }
    // A source that describes nothing gets the safe treatment: it is data.
    if (at === before) {
      const stop = Math.min(end, at + COPY_WINDOW);
      transfers.push(copyData(source, target, at, stop - at));
      at = stop;
    }
    await Promise.all(transfers);
  }
}

async function copyData(source: ExtentReader, target: NbdClient, offset: number, length: number): Promise<void> {
  const pieces: Promise<void>[] = [];
  for (let at = offset; at < offset + length; at += DATA_PIECE) {
    const piece = buffers.take(Math.min(DATA_PIECE, offset + length - at));
    // The write is answered only once the remote has the whole payload: the buffer is free again then.
    pieces.push(
      source
        .read(at, piece)
        .then(() => target.write(at, piece))
        .finally(() => buffers.give(piece)),
    );
  }
  await Promise.all(pieces);
}

/** Makes [offset, offset + length) of `target` read as zeros, by writing zeros if it cannot zero. */
export async function zeroRange(target: NbdClient, offset: number, length: number): Promise<void> {
  const canZero = (target.flags & FLAG_SEND_WRITE_ZEROES) !== 0;
  const piece = canZero ? ZERO_PIECE : DATA_PIECE;
  for (let at = offset; at < offset + length; at += piece) {
    const size = Math.min(piece, offset + length - at);
    if (canZero) await target.writeZeroes(at, size);
    else await target.write(at, ZEROS.subarray(0, size));
  }
}

/** Flushes the target when it has a write cache to flush. */
export async function flushTarget(target: NbdClient): Promise<void> {
  if ((target.flags & FLAG_SEND_FLUSH) !== 0) await target.flush();
}
