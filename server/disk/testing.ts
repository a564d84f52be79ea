// Test helpers for disk images: a sample disk the format tests convert with Debian's qemu-img, a file's bytes as a
// network delivers them, an image's runs applied over a target that held something, a writer's output saved, and
// seeded random numbers.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, ftruncateSync, openSync, writeFileSync, writeSync } from "node:fs";
import { Readable } from "node:stream";
import { ByteReader } from "./byte-reader.ts";
import { type DiskImage, DiskImageError } from "./image.ts";
import type { DiskSource } from "./source.ts";

const MiB = 1024 * 1024;

/** A 40 MiB raw disk: data in a few places (one of them a single sector), zeros elsewhere. */
export function sampleDisk(): Buffer {
  const raw = Buffer.alloc(40 * MiB);
  for (let i = 0; i < 3 * MiB; i++) raw[i] = (i * 7 + 3) & 0xff;
  raw.fill(0x5a, 17 * MiB + 512, 17 * MiB + 1024);
  for (let i = 37 * MiB; i < 40 * MiB; i++) raw[i] = (i * 13) & 0xff;
  return raw;
}

/** A reader of `bytes` arriving in pieces of `piece`. */
export function readerOf(bytes: Buffer, piece = 65_536): ByteReader {
  return new ByteReader(Readable.from(Array.from({ length: Math.ceil(bytes.length / piece) }, (_, i) => bytes.subarray(i * piece, (i + 1) * piece))));
}

/**
 * Every run applied over a target full of 0xAA, as the import writes them into a volume that held something; or
 * over `target` (a copy of a delta's base, which the runs change in place).
 */
export async function applyRuns(image: DiskImage, target = Buffer.alloc(image.virtualSize, 0xaa)): Promise<Buffer> {
  for await (const run of image.runs) {
    const length = "data" in run ? run.data.length : run.zeros;
    assert.ok(run.offset >= 0 && run.offset + length <= image.virtualSize, `a run of ${length} at ${run.offset}`);
    if ("data" in run) run.data.copy(target, run.offset);
    else target.fill(0, run.offset, run.offset + run.zeros);
  }
  return target;
}

/** A writer's output saved at `path` and returned, checked to total the length it said before its first byte. */
export async function saveWritten(path: string, written: { length: number; bytes: AsyncIterable<Buffer> }): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of written.bytes) pieces.push(Buffer.from(piece));
  const bytes = Buffer.concat(pieces);
  assert.equal(bytes.length, written.length, "the writer's bytes total the length it said");
  writeFileSync(path, bytes);
  return bytes;
}

/** Numbers from 0 to 1, the same from the same seed (mulberry32): random test data that fails the same way twice. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/**
 * A seeded random case on a disk of `size` bytes: a base with data in some blocks, a newer disk that differs from it
 * only in the `carried` blocks, and `whole`, the newer disk with what is not carried as zeros.
 */
export function randomDelta(seed: number, size: number): { base: Buffer; newer: Buffer; carried: Set<number>; whole: Buffer } {
  const blocks = Math.ceil(size / MiB);
  const random = seededRandom(seed);
  const fill = (disk: Buffer, chance: number) => {
    for (let index = 0; index < blocks; index++) if (random() < chance) for (let i = index * MiB; i < Math.min(size, (index + 1) * MiB); i += 512) disk.fill(Math.floor(random() * 256), i, i + 512);
  };
  const base = Buffer.alloc(size);
  fill(base, 0.6);
  const carried = new Set([...Array(blocks).keys()].filter(() => random() < 0.5));
  const newer = Buffer.from(base);
  fill(newer, 0.4);
  for (let index = 0; index < blocks; index++) if (!carried.has(index)) base.copy(newer, index * MiB, index * MiB, Math.min(size, (index + 1) * MiB));
  const whole = Buffer.from(newer);
  for (let index = 0; index < blocks; index++) if (!carried.has(index)) whole.fill(0, index * MiB, Math.min(size, (index + 1) * MiB));
  return { base, newer, carried, whole };
}

/** `raw` written to `file`; answers the path. */
export function saveFile(file: string, raw: Buffer): string {
  writeFileSync(file, raw);
  return file;
}

/** A sparse raw file of `size` bytes holding `blocks` (1 MiB each, by index): a disk too large to hold in memory. */
export function saveSparseFile(file: string, size: number, blocks: Map<number, Buffer>): string {
  const fd = openSync(file, "w");
  try {
    ftruncateSync(fd, size);
    for (const [index, data] of blocks) writeSync(fd, data, 0, data.length, index * MiB);
  } finally {
    closeSync(fd);
  }
  return file;
}

/** Sources that break their word (a block not carried, out of order, skipped, short, missing, outside the disk), with what a writer says of each. */
export function faultySources(): Array<[DiskSource, RegExp]> {
  const broken = (blocks: Array<{ index: number; data: Buffer }>, carried = [0, 2]): DiskSource => ({
    virtualSize: 4 * MiB,
    carried: (index) => carried.includes(index),
    async *blocks() {
      yield* blocks;
    },
  });
  const block = (index: number, length = MiB) => ({ index, data: Buffer.alloc(length, 1) });
  return [
    [broken([block(0), block(1)]), /yielded block 1, which it does not carry/],
    [broken([block(0), block(0)]), /yielded block 0 out of order, after block 0/],
    [broken([block(2)]), /skipped carried block 0: it yielded block 2 next/],
    [broken([block(0, 1000)]), /yielded 1000 bytes for block 0, not its 1048576/],
    [broken([block(0)]), /ended before carried block 2/],
    [broken([block(0), block(2), block(3)]), /yielded block 3, which it does not carry/],
    [broken([block(0), block(2), block(9)]), /yielded block 9, outside the disk's 4 blocks/],
  ];
}

/** A writer's bytes gathered, and the longest single step it took (the event loop waits that long). */
export async function drainTimed(bytes: AsyncIterable<Buffer>): Promise<{ bytes: Buffer; longest: number }> {
  const pieces: Buffer[] = [];
  let longest = 0;
  const steps = bytes[Symbol.asyncIterator]();
  for (;;) {
    const start = performance.now();
    const step = await steps.next();
    longest = Math.max(longest, performance.now() - start);
    if (step.done) break;
    pieces.push(Buffer.from(step.value));
  }
  return { bytes: Buffer.concat(pieces), longest };
}

/** A huge sparse disk of `size` bytes: data in four 1 MiB blocks (the first, the fourth, one past 976 GiB, the last). */
export function hugeSparseSource(size: number): { source: DiskSource; blocks: Map<number, Buffer> } {
  const blocks = new Map([0, 3, 1_000_001, size / MiB - 1].map((index) => [index, Buffer.alloc(MiB, (index % 255) + 1)]));
  const source: DiskSource = {
    virtualSize: size,
    carried: (index) => blocks.has(index),
    async *blocks() {
      for (const index of [...blocks.keys()].sort((a, b) => a - b)) yield { index, data: blocks.get(index)! };
    },
  };
  return { source, blocks };
}

/** The ranges `qemu-img map` says hold data, in MiB: [start, length]. */
export function qemuDataMiB(file: string, format: string): Array<[number, number]> {
  const map = JSON.parse(execFileSync("qemu-img", ["map", "--output=json", "-f", format, file], { encoding: "utf8" })) as Array<{ start: number; length: number; data: boolean }>;
  return map.filter((range) => range.data).map((range) => [range.start / MiB, range.length / MiB]);
}

/** Each case's bytes, opened and read to the end, fail with a DiskImageError whose words match its reason. */
export async function assertRefusals(cases: ReadonlyArray<readonly [what: string, bytes: Buffer, reason: RegExp]>, open: (bytes: Buffer) => Promise<DiskImage>): Promise<void> {
  for (const [what, bytes, reason] of cases) {
    await assert.rejects(
      (async () => applyRuns(await open(bytes)))(),
      (error: unknown) => {
        assert.ok(error instanceof DiskImageError, `${what}: ${String(error)}`);
        assert.match(error.message, reason, what);
        return true;
      },
      what,
    );
  }
}

/**
 * A fuzz case's outcome: the image reads whole, every run inside the disk it states, or is refused as a
 * DiskImageError; anything else (a TypeError, a RangeError) fails the case.
 */
export async function readsOrRefuses(open: () => Promise<DiskImage>): Promise<void> {
  try {
    const disk = await open();
    for await (const run of disk.runs) {
      const length = "data" in run ? run.data.length : run.zeros;
      assert.ok(run.offset >= 0 && length > 0 && run.offset + length <= disk.virtualSize, `a run of ${length} at ${run.offset} in a disk of ${disk.virtualSize}`);
    }
  } catch (error) {
    if (!(error instanceof DiskImageError)) throw error;
  }
}
