// xapi's chunked framing, as a script that frames a sparse file writes it (vhd-tool's chunked.ml layout).
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { test } from "node:test";
import { ByteReader } from "./byte-reader.ts";
import { readChunked } from "./chunked.ts";
import { DiskImageError } from "./image.ts";

function frame(offset: number, data: Buffer): Buffer {
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(offset), 0);
  header.writeUInt32LE(data.length, 8);
  return Buffer.concat([header, data]);
}
const END = Buffer.alloc(12);

async function apply(stream: Buffer[], size: number): Promise<Buffer> {
  const target = Buffer.alloc(size, 0xaa);
  // Cut into odd pieces: a header or a frame may arrive split anywhere.
  const bytes = Buffer.concat(stream);
  const pieces = Array.from({ length: Math.ceil(bytes.length / 7777) }, (_, i) => bytes.subarray(i * 7777, (i + 1) * 7777));
  for await (const run of readChunked(new ByteReader(Readable.from(pieces)), size)) {
    assert.ok("data" in run);
    run.data.copy(target, run.offset);
  }
  return target;
}

test("frames in any order are written at their offsets; what no frame writes is left as it was", async () => {
  const size = 4 * 1024 * 1024;
  const a = Buffer.alloc(3 * 1024 * 1024 + 5, 1);
  const b = Buffer.from("the end");
  const out = await apply([frame(size - b.length, b), frame(100, a), END], size);
  assert.ok(out.subarray(100, 100 + a.length).equals(a));
  assert.equal(out.subarray(size - b.length).toString(), "the end");
  assert.equal(out[0], 0xaa);
});

test("a frame past the disk's end, and a stream without its end header, are refused naming the byte", async () => {
  await assert.rejects(apply([frame(1000, Buffer.alloc(100)), END], 1024), (error: unknown) => error instanceof DiskImageError && /goes past the disk's 1024 bytes \(at byte 0\)/.test(error.message));
  await assert.rejects(apply([frame(0, Buffer.alloc(10))], 1024), (error: unknown) => error instanceof DiskImageError && /ends inside a frame header .*\(at byte 22\)/.test(error.message));
  await assert.rejects(apply([frame(0, Buffer.alloc(10)).subarray(0, 17)], 1024), /ends inside the 10 bytes of the frame at disk offset 0 \(5 of its 10 bytes\) \(at byte 17\)/);
});
