// Fuzz target: the zstd frame cutter. Real frames (node:zlib's, with and without checksums, empty ones) and
// skippable frames, glued together and handed over in pieces cut anywhere: the cutter names exactly the frames'
// ends, whatever the pieces. Those bytes edited (flipped, cut short, garbage after): it names ends in order,
// inside the piece, or refuses in words; it never hangs.
import assert from "node:assert/strict";
import { test } from "node:test";
import zlib from "node:zlib";
import fc from "fast-check";
import { fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { ZstdFrameCutter } from "./zstd-frames.ts";

const BUDGET: FuzzBudget = { slice: 300, full: 20_000, fullSeconds: 30, caseMs: 2000 };

const frame = fc.oneof(
  fc.tuple(fc.uint8Array({ maxLength: 300 }), fc.boolean(), fc.integer({ min: 1, max: 5 })).map(([data, checksum, level]) =>
    zlib.zstdCompressSync(data, { params: { [zlib.constants.ZSTD_c_checksumFlag]: checksum ? 1 : 0, [zlib.constants.ZSTD_c_compressionLevel]: level } }),
  ),
  fc.tuple(fc.integer({ min: 0, max: 15 }), fc.uint8Array({ maxLength: 40 })).map(([nibble, data]) => {
    const header = Buffer.alloc(8);
    header.writeUInt32LE((0x184d2a50 | nibble) >>> 0, 0);
    header.writeUInt32LE(data.byteLength, 4);
    return Buffer.concat([header, data]);
  }),
);

/** `bytes` cut at these (sorted, deduplicated) offsets. */
function pieces(bytes: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((cut) => cut % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const to of [...at, bytes.byteLength]) {
    out.push(bytes.subarray(from, to));
    from = to;
  }
  return out;
}

/** The stream offsets the cutter names, or its refusal. */
function cutAll(chunks: Buffer[]): { ends: number[]; error?: Error } {
  const cutter = new ZstdFrameCutter();
  const ends: number[] = [];
  let offset = 0;
  try {
    for (const chunk of chunks) {
      const inChunk = cutter.cut(chunk);
      let last = 0;
      for (const end of inChunk) {
        // A frame ends after at least one byte of this piece was read, and frames are never empty.
        assert.ok(end > last && end <= chunk.byteLength, "ends in order, inside the piece");
        last = end;
        ends.push(offset + end);
      }
      offset += chunk.byteLength;
    }
    cutter.end();
  } catch (error) {
    return { ends, error: error as Error };
  }
  return { ends };
}

test("the zstd frame cutter names every frame's end, however the stream is cut", async (t) => {
  await fuzz(t, "zstd frames", BUDGET, fc.tuple(fc.array(frame, { maxLength: 5 }), fc.array(fc.nat(), { maxLength: 8 })), ([frames, cuts]) => {
    const bytes = Buffer.concat(frames);
    const expected: number[] = [];
    let at = 0;
    for (const f of frames) expected.push((at += f.byteLength));
    const { ends, error } = cutAll(pieces(bytes, cuts));
    assert.equal(error, undefined, error?.message);
    assert.deepEqual(ends, expected);
  });
});

test("edited frames are cut in order or refused in words", async (t) => {
  const edit = fc.tuple(fc.constantFrom("flip", "truncate", "append"), fc.nat(), fc.integer({ min: 1, max: 255 }));
  await fuzz(t, "zstd frames, edited", BUDGET, fc.tuple(fc.array(frame, { minLength: 1, maxLength: 4 }), fc.array(edit, { maxLength: 3 }), fc.array(fc.nat(), { maxLength: 6 })), ([frames, edits, cuts]) => {
    let bytes = Buffer.concat(frames);
    for (const [kind, where, value] of edits) {
      if (kind === "flip") bytes[where % bytes.byteLength]! ^= value;
      else if (kind === "truncate") bytes = bytes.subarray(0, where % bytes.byteLength);
      else bytes = Buffer.concat([bytes, Buffer.alloc(value % 16, value)]);
      if (bytes.byteLength === 0) return;
    }
    const { ends, error } = cutAll(pieces(bytes, cuts));
    for (let i = 1; i < ends.length; i++) assert.ok(ends[i]! > ends[i - 1]!, "ends in order");
    assert.ok(ends.every((end) => end <= bytes.byteLength));
    if (error !== undefined) assert.match(error.message, /^(unknown frame magic [0-9a-f]{8}|reserved bit set in the frame header|reserved block type|unexpected end of file in a frame) at byte \d+$/);
  });
});
