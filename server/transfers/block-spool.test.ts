// The block pool's leases: a block a socket write still reads is not reused until the write has ended, and a
// pool half leased copies instead, so stalled clients cannot starve it. The spool reader: the bytes asked
// for, from any offset, whether the read is direct (aligned pages) or buffered.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { alignedBuffers, BlockPool, DIRECT_ALIGN, SpoolReader } from "./block-spool.ts";

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

test("block pool: a block already given back is never leased (the next take may reuse it)", () => {
  const pool = new BlockPool(4, 4096);
  const block = pool.take()!;
  pool.give(block);
  assert.equal(pool.lease(block), undefined);
  const held = pool.take()!;
  assert.ok(pool.lease(held), "one held is");
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

test("spool reader: the bytes from any offset, up to the end, direct or buffered", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "hangar-spool-reader-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const data = randomBytes(3 * 1024 * 1024 + 1234);
  const path = join(dir, "spool");
  await writeFile(path, data);
  const reader = await SpoolReader.open(path);
  const [aligned] = alignedBuffers(1, 1024 * 1024 + DIRECT_ALIGN);
  const unaligned = Buffer.alloc(1024 * 1024 + DIRECT_ALIGN);
  try {
    assert.equal(await reader.size(), data.length);
    for (const buffer of [aligned!, unaligned]) {
      for (const [position, max] of [[0, 1024 * 1024], [4095, 1024 * 1024], [12_345, 77], [data.length - 100, 1024 * 1024], [data.length, 10]] as const) {
        const bytes = await reader.read(buffer, position, max);
        assert.deepEqual(bytes, data.subarray(position, Math.min(data.length, position + max)), `${position} + ${max}`);
      }
    }
  } finally {
    await reader.close();
  }
});
