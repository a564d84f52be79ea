// Incompressible, non-zero test data made cheaply: a 64 MiB random pool, read at an offset that depends on
// the position and a salt (so layers of a chain hold different bytes), and writers that stream it into
// files and volumes in large buffers with a few writes in flight.
import { randomFillSync } from "node:crypto";
import { open } from "node:fs/promises";
import { openVolumeData } from "../../server/plugins/filesr/index.ts";

const BLOCK = 64 * 1024;
const POOL_SIZE = 64 * 1024 * 1024;
/** Largest write issued by the writers below. */
const WRITE_SIZE = 8 * 1024 * 1024;
const WRITES_IN_FLIGHT = 4;

let pool: Buffer | null = null;

/**
 * The bytes of [offset, offset+length) for `salt`; offset and length are multiples of 64 KiB. A view into
 * the pool when it does not wrap around (do not modify it).
 */
export function contentAt(offset: number, length: number, salt: number): Buffer {
  pool ??= randomFillSync(Buffer.allocUnsafeSlow(POOL_SIZE));
  const blocks = POOL_SIZE / BLOCK;
  const start = (((offset / BLOCK + salt * 4099) % blocks) + blocks) % blocks * BLOCK;
  if (start + length <= POOL_SIZE) return pool.subarray(start, start + length);
  const out = Buffer.allocUnsafe(length);
  for (let done = 0; done < length; ) {
    const from = (start + done) % POOL_SIZE;
    const count = Math.min(length - done, POOL_SIZE - from);
    pool.copy(out, done, from, from + count);
    done += count;
  }
  return out;
}

export interface Extent {
  offset: number;
  length: number;
}

/** What to write at [offset, offset+length). */
export type Content = (offset: number, length: number) => Buffer;

const plain: Content = (offset, length) => contentAt(offset, length, 0);

/** Splits extents into writes of at most WRITE_SIZE and runs them with a few in flight. */
async function writeExtents(extents: readonly Extent[], write: (offset: number, data: Buffer) => Promise<void>, content: Content): Promise<void> {
  const pieces: Extent[] = [];
  for (const { offset, length } of extents) {
    for (let at = 0; at < length; at += WRITE_SIZE) pieces.push({ offset: offset + at, length: Math.min(WRITE_SIZE, length - at) });
  }
  let next = 0;
  const worker = async () => {
    while (next < pieces.length) {
      const piece = pieces[next++]!;
      await write(piece.offset, content(piece.offset, piece.length));
    }
  };
  await Promise.all(Array.from({ length: WRITES_IN_FLIGHT }, worker));
}

/** Writes `extents` of a volume through openVolumeData (the datapath's own write path), then closes it. */
export async function writeVolume(srPath: string, key: string, extents: readonly Extent[], content = plain): Promise<void> {
  const volume = await openVolumeData(srPath, key);
  try {
    await writeExtents(extents, (offset, data) => volume.write(offset, data), content);
  } finally {
    await volume.close();
  }
}

/** Creates (or replaces) a file of `size` bytes holding `content`. */
export async function writeFile(path: string, size: number, content = plain): Promise<void> {
  const file = await open(path, "w");
  try {
    await writeExtents([{ offset: 0, length: size }], async (offset, data) => {
      await file.write(data, 0, data.length, offset);
    }, content);
  } finally {
    await file.close();
  }
}
