// The block pool's leases: a block a socket write still reads is not reused until the write has ended, and a
// pool half leased copies instead, so stalled clients cannot starve it.
import assert from "node:assert/strict";
import { test } from "node:test";
import { BlockPool } from "./block-spool.ts";

test("block pool: a block given back while leased is reused only once its last lease ends", () => {
  const pool = new BlockPool(2, 4096);
  const a = pool.take()!;
  const b = pool.take()!;
  const first = pool.lease(a)!;
  const second = pool.lease(a)!;
  pool.give(a);
  pool.give(b);
  assert.equal(pool.take(), b, "the unleased block is free at once");
  assert.equal(pool.take(), undefined, "the leased one is not");
  first();
  first(); // a release counts once
  assert.equal(pool.take(), undefined, "one lease is left");
  let woken = false;
  pool.onGive(() => (woken = true));
  second();
  assert.ok(woken, "a waiter hears of the block when its last lease ends");
  assert.equal(pool.take(), a);
});

test("block pool: no more than half the blocks are leased at once", () => {
  const pool = new BlockPool(4, 4096);
  const blocks = [pool.take()!, pool.take()!, pool.take()!];
  const releases = [pool.lease(blocks[0]!), pool.lease(blocks[1]!)];
  assert.ok(releases.every((release) => release !== undefined));
  assert.equal(pool.lease(blocks[2]!), undefined, "a third block is copied instead");
  assert.ok(pool.lease(blocks[0]!), "a block already leased may be leased again");
  releases[1]!();
  assert.ok(pool.lease(blocks[2]!), "a lease ended makes room");
});
