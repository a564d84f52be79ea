// An export's read buffers: one is reused once the chunk ending its data has been sent, whichever way the
// stream split it; buffers never handed back are replaced by plain ones, up to the limit.
import assert from "node:assert/strict";
import { test } from "node:test";
import { XVA_BLOCK_SIZE } from "../../xva/format.ts";
import { ReadBuffers } from "./volume-io.ts";

test("read buffers: reused after the chunk holding the data's end is released", () => {
  const buffers = new ReadBuffers(1);
  const first = buffers.take(XVA_BLOCK_SIZE);
  buffers.release(first.subarray(0, 1000));
  const plain = buffers.take(XVA_BLOCK_SIZE);
  assert.notEqual(plain.buffer, first.buffer, "a chunk short of the end leaves the buffer lent");
  buffers.release(first.subarray(1000));
  const again = buffers.take(500);
  assert.equal(again.buffer, first.buffer, "the last part frees it");
  assert.equal(again.length, 500);
  buffers.release(plain);
  assert.notEqual(buffers.take(10).buffer, plain.buffer, "a buffer the pool did not make is never taken in");
});

test("read buffers: a short last block frees its buffer with the chunk ending at its length", () => {
  const buffers = new ReadBuffers(2);
  const last = buffers.take(1234);
  buffers.release(last);
  assert.equal(buffers.take(XVA_BLOCK_SIZE).buffer, last.buffer);
});
