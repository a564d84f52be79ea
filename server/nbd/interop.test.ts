// Interoperability with real NBD peers: libnbd tools and qemu against our server, our client against
// qemu-nbd and nbdkit.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { STATE_HOLE, STATE_ZERO } from "./backend.ts";
import { NbdClient, NbdError } from "./client.ts";
import { openRawFileBackend } from "./raw-file-backend.ts";
import { NbdServer } from "./server.ts";
import { AllocationTrackingBackend, makeTempDir, run, startProcess, waitForSocket } from "./testing.ts";

const MiB = 1024 * 1024;
const BLOCK = 64 * 1024;

/** 8 MiB of random data with a zero MiB in the middle, so sparse-aware copies have something to skip. */
function sourceImage(): Buffer {
  const image = randomBytes(8 * MiB);
  image.fill(0, 3 * MiB, 4 * MiB);
  return image;
}

describe("libnbd and qemu tools against NbdServer", () => {
  let dir: string;
  let server: NbdServer;
  let socketPath: string;
  let source: Buffer;
  const cleanups: (() => Promise<void> | void)[] = [];
  const uri = (name: string) => `nbd+unix:///${name}?socket=${socketPath}`;

  before(async () => {
    dir = await makeTempDir((fn) => cleanups.push(fn));
    source = sourceImage();
    await writeFile(join(dir, "source.raw"), source);
    await writeFile(join(dir, "target.raw"), Buffer.alloc(source.length));
    await writeFile(join(dir, "sparse.raw"), "");
    await truncate(join(dir, "sparse.raw"), 2 * MiB);
    const sparseFile = await openRawFileBackend(join(dir, "sparse.raw"), { readOnly: false });
    await sparseFile.write(BLOCK, Buffer.alloc(BLOCK, 0x5a));
    await sparseFile.close();

    server = new NbdServer();
    server.addExport("source", await openRawFileBackend(join(dir, "source.raw"), { readOnly: true }), { description: "golden image" });
    server.addExport("target", await openRawFileBackend(join(dir, "target.raw"), { readOnly: false }));
    server.addExport(
      "sparse",
      await AllocationTrackingBackend.open(join(dir, "sparse.raw"), { readOnly: true, blockSize: BLOCK, allocatedBlocks: [1] }),
    );
    socketPath = join(dir, "nbd.sock");
    await server.listen({ socketPath });
  });

  after(async () => {
    await server.close();
    for (const fn of cleanups.reverse()) await fn();
  });

  test("nbdinfo --list shows every export with its properties", async () => {
    const listing = JSON.parse(await run("nbdinfo", ["--list", "--json", uri("")]));
    assert.equal(listing.protocol, "newstyle-fixed");
    assert.equal(listing.structured, true);
    const byName = new Map<string, Record<string, unknown>>(listing.exports.map((e: Record<string, unknown>) => [e["export-name"], e]));
    assert.deepEqual([...byName.keys()].sort(), ["source", "sparse", "target"]);
    const sourceInfo = byName.get("source")!;
    assert.equal(sourceInfo["description"], "golden image");
    assert.equal(sourceInfo["export-size"], source.length);
    assert.equal(sourceInfo["is_read_only"], true);
    assert.deepEqual(sourceInfo["contexts"], ["base:allocation"]);
    const targetInfo = byName.get("target")!;
    assert.equal(targetInfo["is_read_only"], false);
    for (const flag of ["can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn", "can_df"]) assert.equal(targetInfo[flag], true, flag);
  });

  test("nbdinfo --map shows the holes a backend reports", async () => {
    const map = JSON.parse(await run("nbdinfo", ["--map", "--json", uri("sparse")]));
    assert.deepEqual(
      map.map((e: { offset: number; length: number; type: number }) => [e.offset, e.length, e.type]),
      [
        [0, BLOCK, STATE_HOLE | STATE_ZERO],
        [BLOCK, BLOCK, 0],
        [2 * BLOCK, 2 * MiB - 2 * BLOCK, STATE_HOLE | STATE_ZERO],
      ],
    );
  });

  test("nbdcopy reads an export byte for byte, including over holes", async () => {
    const out = join(dir, "nbdcopy-out.raw");
    await run("nbdcopy", [uri("source"), out]);
    assert.ok((await readFile(out)).equals(source));
    const sparseOut = join(dir, "nbdcopy-sparse.raw");
    await run("nbdcopy", [uri("sparse"), sparseOut]);
    const expected = Buffer.alloc(2 * MiB);
    expected.fill(0x5a, BLOCK, 2 * BLOCK);
    assert.ok((await readFile(sparseOut)).equals(expected));
  });

  test("nbdcopy writes into an export over several connections", async () => {
    await run("nbdcopy", ["--flush", "--connections=4", join(dir, "source.raw"), uri("target")]);
    assert.ok((await readFile(join(dir, "target.raw"))).equals(source));
  });

  test("qemu-img info and convert work in both directions", async () => {
    const info = JSON.parse(await run("qemu-img", ["info", "--output=json", uri("source")]));
    assert.equal(info["virtual-size"], source.length);
    const out = join(dir, "qemu-out.raw");
    await run("qemu-img", ["convert", "-O", "raw", uri("source"), out]);
    assert.ok((await readFile(out)).equals(source));

    const other = randomBytes(source.length);
    await writeFile(join(dir, "other.raw"), other);
    await run("qemu-img", ["convert", "-n", "-f", "raw", "-O", "raw", join(dir, "other.raw"), uri("target")]);
    assert.ok((await readFile(join(dir, "target.raw"))).equals(other));
    await run("qemu-img", ["compare", "-f", "raw", "-F", "raw", join(dir, "other.raw"), uri("target")]);
  });

  test("a write tool cannot write to a read-only export", async () => {
    await assert.rejects(run("nbdcopy", [join(dir, "other.raw"), uri("source")]), /read.only|EPERM|Operation not permitted/i);
  });
});

describe("NbdClient against qemu-nbd and nbdkit", () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  const cleanup = (fn: () => Promise<void> | void) => cleanups.push(fn);
  let dir: string;

  before(async () => {
    dir = await makeTempDir(cleanup);
  });

  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("qemu-nbd: read, write, flush, trim, zeroes and sparse block status", async () => {
    const image = join(dir, "qemu.raw");
    await writeFile(image, "");
    await truncate(image, 4 * MiB);
    const data = randomBytes(BLOCK);
    const seed = await openRawFileBackend(image, { readOnly: false });
    await seed.write(MiB, data);
    await seed.close();
    const socketPath = join(dir, "qemu.sock");
    startProcess(cleanup, "qemu-nbd", [`--socket=${socketPath}`, "--format=raw", "--persistent", "--export-name=vol", image]);
    await waitForSocket(socketPath);

    const client = await NbdClient.connect(`nbd+unix:///vol?socket=${socketPath}`);
    try {
      assert.equal(client.size, 4 * MiB);
      assert.equal(client.structuredReplies, true);
      assert.equal(client.hasBlockStatus, true);
      assert.deepEqual(await client.read(MiB, BLOCK), data);
      const extents = await client.blockStatus(0, 4 * MiB);
      assert.equal(extents.reduce((sum, e) => sum + e.length, 0), 4 * MiB);
      assert.equal(extents[0]!.flags & STATE_HOLE, STATE_HOLE);
      const dataExtent = extents.find((e) => e.flags === 0);
      assert.ok(dataExtent !== undefined, "qemu should report the written block as data");
      // Holes are served as OFFSET_HOLE chunks: the client must hand back zeros.
      assert.deepEqual(await client.read(0, MiB), Buffer.alloc(MiB));

      const fresh = randomBytes(300_000);
      await client.write(123_456, fresh, { fua: true });
      await client.flush();
      assert.deepEqual(await client.read(123_456, fresh.length), fresh);
      await client.writeZeroes(123_456, 1000);
      await client.trim(MiB, BLOCK);
      await client.flush();
      assert.deepEqual(await client.read(123_456, 1000), Buffer.alloc(1000));
      const file = await readFile(image);
      assert.deepEqual(file.subarray(123_456, 123_456 + 1000), Buffer.alloc(1000));
      assert.deepEqual(file.subarray(123_456 + 1000, 123_456 + 300_000), fresh.subarray(1000));
      await assert.rejects(client.read(4 * MiB - 1, 2), (e: NbdError) => e.errno === "EINVAL");
      const concurrent = await Promise.all(Array.from({ length: 64 }, (_, i) => client.read(i * 4096, 4096)));
      assert.deepEqual(Buffer.concat(concurrent), await client.read(0, 64 * 4096));
    } finally {
      await client.close();
    }
  });

  test("qemu-nbd read-only export: the client reports it and refuses writes", async () => {
    const image = join(dir, "qemu-ro.raw");
    await writeFile(image, Buffer.alloc(MiB, 3));
    const socketPath = join(dir, "qemu-ro.sock");
    startProcess(cleanup, "qemu-nbd", [`--socket=${socketPath}`, "--format=raw", "--persistent", "--read-only", image]);
    await waitForSocket(socketPath);
    const client = await NbdClient.connect(`nbd:unix:${socketPath}`);
    try {
      assert.equal(client.readOnly, true);
      await assert.rejects(client.write(0, Buffer.alloc(1)), (e: NbdError) => e.errno === "EPERM");
      assert.deepEqual(await client.read(0, 16), Buffer.alloc(16, 3));
    } finally {
      await client.close();
    }
  });

  test("nbdkit memory: pipelined writes and reads, holes, trim and zeroes", async () => {
    const socketPath = join(dir, "nbdkit.sock");
    startProcess(cleanup, "nbdkit", ["--unix", socketPath, "--foreground", "--exit-with-parent", "memory", "64M"]);
    await waitForSocket(socketPath);
    const client = await NbdClient.connect(`nbd+unix:///?socket=${socketPath}`);
    try {
      assert.equal(client.size, 64 * MiB);
      assert.equal(client.hasBlockStatus, true);
      assert.deepEqual(await client.blockStatus(0, 64 * MiB), [{ length: 64 * MiB, flags: STATE_HOLE | STATE_ZERO }]);
      const pieces = Array.from({ length: 100 }, (_, i) => ({ offset: i * 300_000, data: randomBytes(100_000 + i) }));
      await Promise.all(pieces.map((p) => client.write(p.offset, p.data)));
      const back = await Promise.all(pieces.map((p) => client.read(p.offset, p.data.length)));
      back.forEach((bytes, i) => assert.deepEqual(bytes, pieces[i]!.data));
      const extents = await client.blockStatus(0, 64 * MiB);
      assert.equal(extents[0]!.flags, 0);
      await client.trim(0, 64 * MiB);
      assert.deepEqual(await client.read(0, 100_000), Buffer.alloc(100_000));
      await client.write(0, Buffer.alloc(4096, 1));
      await client.writeZeroes(0, 4096, { noHole: true });
      assert.deepEqual(await client.read(0, 4096), Buffer.alloc(4096));
      await client.flush();
    } finally {
      await client.close();
    }
  });

  test("nbdkit without structured replies: simple replies, block status falls back to data", async () => {
    const socketPath = join(dir, "nbdkit-nosr.sock");
    startProcess(cleanup, "nbdkit", ["--unix", socketPath, "--foreground", "--exit-with-parent", "--no-sr", "pattern", "8M"]);
    await waitForSocket(socketPath);
    const client = await NbdClient.connect(`nbd+unix:///?socket=${socketPath}`);
    try {
      assert.equal(client.structuredReplies, false);
      assert.equal(client.hasBlockStatus, false);
      assert.deepEqual(await client.blockStatus(0, 8 * MiB), [{ length: 8 * MiB, flags: 0 }]);
      // The pattern plugin stores each 8-byte offset big-endian at that offset.
      const bytes = await client.read(MiB, 16);
      assert.equal(bytes.readBigUInt64BE(0), BigInt(MiB));
      assert.equal(bytes.readBigUInt64BE(8), BigInt(MiB + 8));
      await assert.rejects(client.read(8 * MiB, 8), (e: NbdError) => e.errno === "EINVAL");
    } finally {
      await client.close();
    }
  });

  test("nbdkit with old handshakes: non-fixed newstyle and oldstyle", async () => {
    for (const [name, args] of [
      ["newstyle", ["--mask-handshake=0"]],
      ["oldstyle", ["--oldstyle"]],
    ] as const) {
      const socketPath = join(dir, `nbdkit-${name}.sock`);
      startProcess(cleanup, "nbdkit", ["--unix", socketPath, "--foreground", "--exit-with-parent", ...args, "pattern", "1M"]);
      await waitForSocket(socketPath);
      const client = await NbdClient.connect(`nbd+unix:///?socket=${socketPath}`);
      try {
        assert.equal(client.size, MiB, name);
        assert.equal((await client.read(4096, 8)).readBigUInt64BE(0), 4096n, name);
      } finally {
        await client.close();
      }
    }
  });
});
