// The raw and chunked writers: raw gives the disk byte for byte (what is not carried as zeros, never read); chunked
// frames only the carried blocks, which the repo's chunked reader lands at their offsets.
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { describe, test } from "node:test";
import { ByteReader } from "./byte-reader.ts";
import { readChunked } from "./chunked.ts";
import { chunkedLength, writeChunked, writeRaw } from "./raw-writer.ts";
import { bufferSource, type DiskSource, SOURCE_BLOCK } from "./source.ts";
import { sampleDisk } from "./testing.ts";

const MiB = 1024 * 1024;

async function collect(pieces: AsyncIterable<Buffer>): Promise<Buffer> {
  const all: Buffer[] = [];
  for await (const piece of pieces) all.push(piece);
  return Buffer.concat(all);
}

/** A source over `disk` that records which blocks it was asked for. */
function recording(disk: Buffer, carried?: (index: number) => boolean): { source: DiskSource; read: number[] } {
  const inner = bufferSource(disk, carried);
  const read: number[] = [];
  return {
    read,
    source: {
      ...inner,
      async *blocks() {
        for await (const block of inner.blocks()) {
          read.push(block.index);
          yield block;
        }
      },
    },
  };
}

describe("raw and chunked disk writers", () => {
  const sample = sampleDisk();
  const odd = Buffer.concat([sample, Buffer.alloc(3 * 512, 0x33)]);

  for (const [what, disk] of [
    ["40 MiB", sample],
    ["40 MiB and 3 sectors", odd],
    ["all zeros", Buffer.alloc(8 * MiB)],
  ] as const) {
    test(`raw, ${what}: every byte, only carried blocks read`, async () => {
      const { source, read } = recording(disk);
      const out = await collect(writeRaw(source));
      assert.equal(out.length, disk.length);
      assert.ok(out.equals(disk));
      assert.deepEqual(
        read,
        Array.from({ length: Math.ceil(disk.length / SOURCE_BLOCK) }, (_, i) => i).filter((i) => source.carried(i)),
      );
    });
  }

  test("chunked: a frame per carried block (a zero one too), read back by readChunked over a target that held something", async () => {
    // A delta's map: block 5 carried though all zeros (it must clear the target), block 2 not though it holds data.
    const carried = (index: number) => [0, 5, 17, 40].includes(index);
    const source = bufferSource(odd, carried);
    const bytes = await collect(writeChunked(source));
    assert.equal(bytes.length, chunkedLength(source));
    assert.equal(bytes.length, 3 * (12 + MiB) + (12 + 3 * 512) + 12);
    const target = Buffer.alloc(odd.length, 0xaa);
    const pieces = Array.from({ length: Math.ceil(bytes.length / 7777) }, (_, i) => bytes.subarray(i * 7777, (i + 1) * 7777));
    const frames: number[] = [];
    for await (const run of readChunked(new ByteReader(Readable.from(pieces)), odd.length)) {
      assert.ok("data" in run);
      frames.push(run.offset);
      run.data.copy(target, run.offset);
    }
    assert.deepEqual(frames, [0, 5 * MiB, 17 * MiB, 40 * MiB]);
    for (let index = 0; index * SOURCE_BLOCK < odd.length; index++) {
      const block = (b: Buffer) => b.subarray(index * SOURCE_BLOCK, (index + 1) * SOURCE_BLOCK);
      assert.ok(carried(index) ? block(target).equals(block(odd)) : block(target).every((b) => b === 0xaa), `block ${index}`);
    }
  });

  test("an empty map is the end header alone; a source that disagrees with its map is refused", async () => {
    assert.ok((await collect(writeChunked(bufferSource(Buffer.alloc(4 * MiB))))).equals(Buffer.alloc(12)));
    const liar: DiskSource = { ...bufferSource(sample), carried: (index) => index !== 1 };
    await assert.rejects(collect(writeRaw(liar)), /block 1/);
    await assert.rejects(collect(writeChunked(liar)), /block 1/);
  });
});
