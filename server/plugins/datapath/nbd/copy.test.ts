import assert from "node:assert/strict";
import { test } from "node:test";
import { byteRanges, totalBytes } from "./copy.ts";

test("a blocklist becomes sorted, merged byte ranges cut to the volume", () => {
  const ranges = byteRanges({ blocksize: 512, ranges: [[10, 2], [0, 1], [11, 4], [30, 0], [100, 50]] }, 120 * 512);
  assert.deepEqual(ranges, [
    [0, 512],
    [10 * 512, 15 * 512],
    [100 * 512, 120 * 512],
  ]);
  assert.equal(totalBytes(ranges), 512 + 5 * 512 + 20 * 512);
});

test("a bad blocklist is refused", () => {
  assert.throws(() => byteRanges({ blocksize: 0, ranges: [[0, 1]] }, 4096), /blocksize/);
  assert.throws(() => byteRanges({ blocksize: 512, ranges: [[-1, 1]] }, 4096), /negative/);
});
