// The block pool's leases: a block a socket write still reads is not reused until the write has ended, and a
// pool half leased copies instead, so stalled clients cannot starve it. The spool reader: the bytes asked
// for, from any offset, whether the read is direct (aligned pages) or buffered. A filesystem that takes O_DIRECT
// opens but refuses the I/O (EINVAL): the spool goes buffered and loses nothing.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { type FileHandle, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { alignedBuffers, BlockPool, DIRECT_ALIGN, SpoolReader, SpoolWriter } from "./block-spool.ts";

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
    // The Node Buffer went buffered by choice: a direct read from its unaligned memory would have failed with EINVAL and dropped O_DIRECT.
    assert.notEqual(directHandle(reader), undefined);
  } finally {
    await reader.close();
  }
});

/** The spool's O_DIRECT handle (private: the fault is injected into it as such a filesystem would answer). */
function directHandle(spool: SpoolWriter | SpoolReader): FileHandle | undefined {
  return (spool as unknown as { file: { direct: FileHandle | undefined } }).file.direct;
}

const failing = (code: string) => () => Promise.reject(Object.assign(new Error(`${code}: injected, direct I/O`), { code }));

test("spool file: O_DIRECT I/O refused with EINVAL goes buffered for good and loses no byte; other errors are thrown", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "hangar-spool-einval-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, "spool");
  const blocks = alignedBuffers(3, 1024 * 1024);
  for (const block of blocks) block.set(randomBytes(block.length));
  const tail = randomBytes(1234);

  const writer = await SpoolWriter.open(path, 0, { fresh: true });
  try {
    const direct = directHandle(writer);
    assert.ok(direct !== undefined, "the scratch filesystem takes O_DIRECT opens");
    // Anything but EINVAL is a real failure (a full disk, an I/O error): thrown, the direct handle kept.
    direct.writev = failing("EIO");
    await assert.rejects(writer.write([blocks[0]!]), { code: "EIO" });
    assert.equal(directHandle(writer), direct);
    assert.equal(writer.position, 0);
    direct.writev = failing("EINVAL");
    await writer.write([blocks[0]!]);
    assert.equal(directHandle(writer), undefined, "the direct handle is dropped at its first EINVAL");
    await writer.write([blocks[1]!, blocks[2]!]);
    await writer.write([tail]);
    assert.equal(writer.position, 3 * 1024 * 1024 + tail.length);
  } finally {
    await writer.close();
  }
  const written = Buffer.concat([...blocks, tail]);
  assert.deepEqual(await readFile(path), written);

  const reader = await SpoolReader.open(path);
  try {
    const direct = directHandle(reader);
    assert.ok(direct !== undefined);
    direct.read = failing("EINVAL");
    const [buffer] = alignedBuffers(1, 1024 * 1024 + DIRECT_ALIGN);
    assert.deepEqual(await reader.read(buffer!, 4096, 1024 * 1024), written.subarray(4096, 4096 + 1024 * 1024));
    assert.equal(directHandle(reader), undefined);
    assert.deepEqual(await reader.read(buffer!, 3 * 1024 * 1024, 1024 * 1024), tail);
  } finally {
    await reader.close();
  }
});
