// Recognisable data for the checks that write through a datapath: a few areas of a volume, each filled
// with bytes derived from a seed, so a read tells which write (if any) it sees.
import { createHash } from "node:crypto";
import type { Disk } from "./disk.ts";
import { Failure } from "./expect.ts";

/** Bytes per area: the granularity of CBT bitmaps in real toolstacks, and a whole number of NBD blocks. */
export const AREA_SIZE = 64 * 1024;

export interface Area {
  offset: number;
  length: number;
}

/** The first area, one in the middle and the last whole one of a volume of `size` bytes. */
export function testAreas(size: number): Area[] {
  const count = Math.floor(size / AREA_SIZE);
  if (count < 3) throw new Error(`volume of ${size} bytes is too small for the data checks`);
  const indexes = [0, Math.floor(count / 2), count - 1];
  return indexes.map((index) => ({ offset: index * AREA_SIZE, length: AREA_SIZE }));
}

/** Deterministic, non-zero bytes for `seed` at `offset` (a SHA-256 counter stream). */
export function patternBytes(seed: string, offset: number, length: number): Buffer {
  const out = Buffer.alloc(length);
  for (let at = 0; at < length; at += 32) {
    createHash("sha256").update(`${seed}:${offset + at}`).digest().copy(out, at);
  }
  return out;
}

export async function writeAreas(disk: Disk, areas: readonly Area[], seed: string): Promise<void> {
  for (const area of areas) await disk.write(area.offset, patternBytes(seed, area.offset, area.length));
  await disk.flush();
}

/**
 * Fails unless every area holds the bytes of `seed` (null: zeros). `what` names the disk; `others` are seeds
 * of other writes, named in the reason when the disk shows one of them instead.
 */
export async function expectAreas(disk: Disk, areas: readonly Area[], seed: string | null, what: string, others: readonly string[] = []): Promise<void> {
  for (const area of areas) {
    const actual = await disk.read(area.offset, area.length);
    if (!actual.equals(contentOf(seed, area))) {
      const seen = others.find((other) => actual.equals(contentOf(other, area)));
      const description = seen !== undefined ? `the data of write "${seen}"` : actual.every((byte) => byte === 0) ? "zeros" : "other data";
      throw new Failure(`${what}: bytes ${area.offset}..${area.offset + area.length} hold ${description}, expected ${seed === null ? "zeros" : `the data of write "${seed}"`}`);
    }
  }
}

function contentOf(seed: string | null, area: Area): Buffer {
  return seed === null ? Buffer.alloc(area.length) : patternBytes(seed, area.offset, area.length);
}
