// The buffer pool: exact sizes reused within the idle limit; lent buffers reused once the chunk ending their data
// is released, whichever way a stream split it, and never more lent at once than allowed; and, in every short
// sequence of calls, no memory handed out twice at once.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BufferPool } from "./buffer-pool.ts";

const MiB = 1024 * 1024;

test("buffer pool: a given-back buffer comes back for its exact size only", () => {
  const pool = new BufferPool(4 * MiB);
  const first = pool.take(MiB);
  pool.give(first);
  assert.notEqual(pool.take(MiB - 1), first);
  assert.equal(pool.take(MiB), first);
  assert.notEqual(pool.take(MiB), first, "taken again only once given again");
});

test("buffer pool: idle bytes stay within the limit", () => {
  const pool = new BufferPool(2 * MiB);
  const big = pool.take(4 * MiB);
  pool.give(big);
  assert.notEqual(pool.take(4 * MiB), big, "a buffer larger than the limit is not kept");
  const [a, b, c] = [pool.take(MiB), pool.take(MiB), pool.take(MiB)];
  pool.give(a);
  pool.give(b);
  pool.give(c);
  // Full at the third: the free lists start over with it alone.
  assert.equal(pool.take(MiB), c);
  assert.notEqual(pool.take(MiB), b);
});

test("buffer pool: a lent buffer is reused after the chunk holding the data's end is released", () => {
  const pool = new BufferPool(MiB, { size: MiB, count: 1 });
  const first = pool.lend(MiB);
  pool.release(first.subarray(0, 1000));
  const plain = pool.lend(MiB);
  assert.notEqual(plain.buffer, first.buffer, "a chunk short of the end leaves the buffer lent");
  pool.release(first.subarray(1000));
  const again = pool.lend(500);
  assert.equal(again.buffer, first.buffer, "the last part frees it");
  assert.equal(again.length, 500);
  pool.release(plain);
  assert.notEqual(pool.lend(10).buffer, plain.buffer, "a buffer the pool did not make is never taken in");
});

test("buffer pool: a short lent block frees its buffer with the chunk ending at its length", () => {
  const pool = new BufferPool(2 * MiB, { size: MiB, count: 2 });
  const last = pool.lend(1234);
  pool.release(last);
  assert.equal(pool.lend(MiB).buffer, last.buffer);
});

test("buffer pool: data longer than the lent size gets a plain buffer", () => {
  const pool = new BufferPool(2 * MiB, { size: MiB, count: 2 });
  const long = pool.lend(MiB + 1);
  assert.equal(long.length, MiB + 1);
  pool.release(long);
  assert.notEqual(pool.lend(MiB).buffer, long.buffer);
});

test("buffer pool: in every sequence of a few calls, no memory out is handed out again, and at most `count` buffers are lent", () => {
  // Small enough that every plain buffer lend() falls back to comes from Node's shared slab: memory of exactly
  // SIZE bytes is the pool's own.
  const SIZE = 1000;
  const COUNT = 2;
  const DEPTH = 5;
  const overlaps = (a: Uint8Array, b: Uint8Array) =>
    a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;
  type State = { sequence: number; pool: BufferPool; taken: Buffer[]; lent: Array<{ data: Buffer; parts: Buffer[] }> };
  const handOut = (state: State, buffer: Buffer) => {
    for (const other of [...state.taken, ...state.lent.map((loan) => loan.data)]) assert.ok(buffer.byteLength === 0 || !overlaps(buffer, other), `sequence ${state.sequence}: memory still out handed out again`);
  };
  const take = (size: number) => (state: State) => {
    const buffer = state.pool.take(size);
    handOut(state, buffer);
    state.taken.push(buffer);
  };
  const lend = (length: number) => (state: State) => {
    const data = state.pool.lend(length);
    assert.equal(data.length, length);
    handOut(state, data);
    // Halved on its way, as a stream may split it; its parts are released in order.
    const half = length >> 1;
    state.lent.push({ data, parts: half === 0 ? [data] : [data.subarray(0, half), data.subarray(half)] });
  };
  const release = (which: "oldest" | "newest") => (state: State) => {
    const loan = which === "oldest" ? state.lent[0] : state.lent.at(-1);
    if (loan === undefined) return;
    state.pool.release(loan.parts.shift()!);
    if (loan.parts.length === 0) state.lent.splice(state.lent.indexOf(loan), 1);
  };
  const give = (state: State) => {
    const buffer = state.taken.shift();
    if (buffer !== undefined) state.pool.give(buffer);
  };
  const calls = [take(10), take(SIZE), give, lend(1), lend(SIZE), lend(SIZE + 1), release("oldest"), release("newest")];
  for (let sequence = 0; sequence < calls.length ** DEPTH; sequence++) {
    // Idle room for one pooled buffer and a little: giving more back starts the free lists over.
    const state: State = { sequence, pool: new BufferPool(SIZE + 20, { size: SIZE, count: COUNT }), taken: [], lent: [] };
    for (let step = 0, rest = sequence; step < DEPTH; step++, rest = Math.floor(rest / calls.length)) {
      calls[rest % calls.length]!(state);
      const pooled = state.lent.filter((loan) => loan.data.buffer.byteLength === SIZE).length;
      assert.ok(pooled <= COUNT, `sequence ${sequence}: ${pooled} buffers lent`);
    }
  }
});
