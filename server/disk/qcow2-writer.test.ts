// The qcow2 writer against Debian's qemu-img (info, check for errors and leaks, compare; a delta opened with its
// backing file from the same directory) and our own reader: sizes off the cluster, an all-zero disk, a delta, a
// seeded random block map, a 2 TiB sparse disk, and sources that break their word.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { DiskImageError } from "./image.ts";
import { openQcow2 } from "./qcow2.ts";
import { writeQcow2 } from "./qcow2-writer.ts";
import { bufferSource, type DiskSource, SOURCE_BLOCK } from "./source.ts";
import { applyRuns, drainTimed, hugeSparseSource, qemuDataMiB, randomDelta, readerOf, sampleDisk, faultySources, saveFile, saveSparseFile, saveWritten } from "./testing.ts";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "hangar-qcow2-writer-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-qcow2-writer-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

interface QemuInfo {
  format: string;
  "virtual-size": number;
  "cluster-size": number;
  "backing-filename"?: string;
  "backing-filename-format"?: string;
  "format-specific": { data: { compat: string; "refcount-bits": number } };
}
interface QemuCheck {
  "check-errors": number;
  corruptions?: number;
  leaks?: number;
  "image-end-offset": number;
}

const qemuInfo = (file: string) => JSON.parse(execFileSync("qemu-img", ["info", "--output=json", file], { encoding: "utf8" })) as QemuInfo;
/** qemu-img check's findings (it exits non-zero on any). */
const qemuCheck = (file: string) => JSON.parse(execFileSync("qemu-img", ["check", "--output=json", file], { encoding: "utf8" })) as QemuCheck;
const assertClean = (file: string, length: number) => {
  const check = qemuCheck(file);
  assert.equal(check["check-errors"], 0);
  assert.equal(check.corruptions ?? 0, 0, "no corruption");
  assert.equal(check.leaks ?? 0, 0, "no leaked cluster");
  assert.equal(check["image-end-offset"], length, "every cluster of the file is in use");
};
/** qemu-img compare exits 0 when the images read the same. */
const assertQemuEqual = (image: string, raw: string) => execFileSync("qemu-img", ["compare", "-f", "qcow2", "-F", "raw", image, raw], { stdio: "pipe" });

const saveSparseRaw = (name: string, size: number, blocks: Map<number, Buffer>) => saveSparseFile(join(dir, name), size, blocks);
const saveRaw = (name: string, raw: Buffer) => saveFile(join(dir, name), raw);

/** A disk of `size` bytes, data in blocks 0, 2, the middle and the last (which may be short), zeros elsewhere. */
function diskOf(size: number): Buffer {
  const raw = Buffer.alloc(size);
  const last = Math.ceil(size / SOURCE_BLOCK) - 1;
  for (const index of [0, 2, Math.floor(last / 2), last]) for (let i = index * SOURCE_BLOCK; i < Math.min(size, (index + 1) * SOURCE_BLOCK); i++) raw[i] = (i * 31 + index) & 0xff;
  return raw;
}

describe("qcow2 writer", () => {
  const sizes: Array<[string, Buffer]> = [
    ["the 40 MiB sample disk", sampleDisk()],
    ["a size off the 64 KiB cluster (40 MiB + 3 sectors), data in its short last block", diskOf(40 * MiB + 3 * 512)],
    ["an all-zero disk (no cluster at all)", Buffer.alloc(8 * MiB)],
  ];
  for (const [what, raw] of sizes) {
    test(`${what}: qemu-img checks it clean and reads the disk, so does our reader; the length is the file's`, async () => {
      const name = what.replace(/\W+/g, "-").slice(0, 40);
      const rawFile = saveRaw(`${name}.raw`, raw);
      const file = join(dir, `${name}.qcow2`);
      const written = writeQcow2(bufferSource(raw));
      const bytes = await saveWritten(file, written);
      assert.equal(statSync(file).size, written.length);
      const info = qemuInfo(file);
      assert.equal(info.format, "qcow2");
      assert.equal(info["virtual-size"], raw.length);
      assert.equal(info["cluster-size"], 65536);
      assert.equal(info["format-specific"].data.compat, "1.1");
      assert.equal(info["format-specific"].data["refcount-bits"], 16);
      assert.equal(info["backing-filename"], undefined);
      assertClean(file, written.length);
      assertQemuEqual(file, rawFile);
      const image = await openQcow2(readerOf(bytes), { length: bytes.length, spillDir });
      assert.ok((await applyRuns(image)).equals(raw), "our reader reads the disk");
    });
  }

  test("the layout: header, refcount table and blocks, L1, L2, data in disk order; the same bytes each time", async () => {
    const raw = sampleDisk();
    const bytes = await saveWritten(join(dir, "layout.qcow2"), writeQcow2(bufferSource(raw)));
    const again = await saveWritten(join(dir, "layout-again.qcow2"), writeQcow2(bufferSource(raw)));
    assert.equal(createHash("sha256").update(bytes).digest("hex"), createHash("sha256").update(again).digest("hex"), "same inputs, same bytes");
    const cluster = 65536;
    assert.equal(bytes.readUInt32BE(0), 0x514649fb);
    assert.equal(bytes.readUInt32BE(4), 3);
    assert.equal(bytes.readUInt32BE(96), 4, "refcount_order 4");
    assert.equal(bytes.readUInt32BE(100), 112, "header_length 112");
    assert.equal(bytes.readBigUInt64BE(112), 0n, "the end of the header extensions");
    assert.equal(bytes.readBigUInt64BE(48), BigInt(cluster), "the refcount table in cluster 1");
    assert.equal(bytes.readUInt32BE(56), 1);
    assert.equal(bytes.readBigUInt64BE(cluster), BigInt(2 * cluster), "its refcount block in cluster 2");
    assert.equal(bytes.readBigUInt64BE(40), BigInt(3 * cluster), "the L1 table in cluster 3");
    assert.equal(bytes.readUInt32BE(36), 1);
    assert.equal(bytes.readBigUInt64BE(3 * cluster), (1n << 63n) | BigInt(4 * cluster), "one L2 table, in cluster 4, used once");
    // Blocks 0, 1, 2, 17, 37, 38, 39: 16 clusters each, from cluster 5 on, in disk order.
    const l2 = 4 * cluster;
    const carried = [0, 1, 2, 17, 37, 38, 39];
    carried.forEach((block, n) => {
      for (let c = 0; c < 16; c++) assert.equal(bytes.readBigUInt64BE(l2 + (block * 16 + c) * 8), (1n << 63n) | BigInt((5 + n * 16 + c) * cluster), `block ${block} cluster ${c}`);
    });
    assert.equal(bytes.readBigUInt64BE(l2 + 3 * 16 * 8), 0n, "block 3 unallocated");
    const clusters = 5 + carried.length * 16;
    assert.equal(bytes.length, clusters * cluster);
    const refcounts = bytes.subarray(2 * cluster, 3 * cluster);
    for (let c = 0; c < 32768; c++) assert.equal(refcounts.readUInt16BE(c * 2), c < clusters ? 1 : 0, `refcount of cluster ${c}`);
  });

  test("a delta of the blocks that differ, backed by base.qcow2: qemu-img opens it with its backing file and reads the newer disk", async () => {
    const base = sampleDisk();
    const newer = Buffer.from(base);
    // Block 1 changes in part, block 5 gains data, block 37 becomes zeros (a carried block of zeros hides the
    // backing file's data), a sector of block 17 changes, the last byte changes.
    newer.fill(0x11, 1 * MiB + 4096, 1 * MiB + 8192);
    newer.fill(0x22, 5 * MiB, 6 * MiB);
    newer.fill(0, 37 * MiB, 38 * MiB);
    newer.fill(0x33, 17 * MiB + 512, 17 * MiB + 1024);
    newer[40 * MiB - 1] = 0x44;
    const differs = (index: number) => !base.subarray(index * MiB, (index + 1) * MiB).equals(newer.subarray(index * MiB, (index + 1) * MiB));
    await saveWritten(join(dir, "base.qcow2"), writeQcow2(bufferSource(base)));
    const deltaFile = join(dir, "delta.qcow2");
    const written = writeQcow2(bufferSource(newer, differs), { backingFile: "base.qcow2" });
    const bytes = await saveWritten(deltaFile, written);
    const info = qemuInfo(deltaFile);
    assert.equal(info["backing-filename"], "base.qcow2");
    assert.equal(info["backing-filename-format"], "qcow2");
    assert.equal(info["virtual-size"], newer.length);
    assertClean(deltaFile, written.length);
    assertQemuEqual(deltaFile, saveRaw("newer.raw", newer));
    assert.equal(written.length, 65536 * (5 + 5 * 16), "the header, refcounts, L1, L2 and the 5 blocks that differ");
    // Our reader imports whole disks only, and says so.
    await assert.rejects(
      (async () => applyRuns(await openQcow2(readerOf(bytes), { length: bytes.length, spillDir })))(),
      (error: unknown) => error instanceof DiskImageError && /has a backing file/.test(error.message),
    );
  });

  test("another backing format, named in the header extension", async () => {
    const raw = diskOf(4 * MiB);
    saveRaw("base-raw.img", raw);
    const file = join(dir, "over-raw.qcow2");
    await saveWritten(file, writeQcow2(bufferSource(raw, (index) => index === 2), { backingFile: "base-raw.img", backingFormat: "raw" }));
    assert.equal(qemuInfo(file)["backing-filename-format"], "raw");
    assertQemuEqual(file, join(dir, "base-raw.img"));
  });

  test("a seeded random block map on an 8 MiB + 3 sector disk: whole (zeros where not carried) and as a delta", async () => {
    const size = 8 * MiB + 3 * 512;
    for (let seed = 1; seed <= 4; seed++) {
      const { base, newer, carried, whole } = randomDelta(seed, size);
      const wholeFile = join(dir, `random-${seed}.qcow2`);
      const written = writeQcow2(bufferSource(newer, (index) => carried.has(index)));
      const bytes = await saveWritten(wholeFile, written);
      assertClean(wholeFile, written.length);
      assertQemuEqual(wholeFile, saveRaw(`random-${seed}.raw`, whole));
      assert.ok((await applyRuns(await openQcow2(readerOf(bytes), { length: bytes.length, spillDir }))).equals(whole), `seed ${seed}: our reader`);

      await saveWritten(join(dir, `random-base-${seed}.qcow2`), writeQcow2(bufferSource(base, () => true)));
      const deltaFile = join(dir, `random-delta-${seed}.qcow2`);
      const delta = writeQcow2(bufferSource(newer, (index) => carried.has(index)), { backingFile: `random-base-${seed}.qcow2` });
      await saveWritten(deltaFile, delta);
      assertClean(deltaFile, delta.length);
      assertQemuEqual(deltaFile, saveRaw(`random-newer-${seed}.raw`, newer));
    }
  });

  test("a 2 TiB sparse disk: tables laid out in short steps, three L2 tables, checked clean and read equal by qemu-img", async () => {
    const size = 2 * 1024 * 1024 * MiB;
    const { source, blocks } = hugeSparseSource(size);
    const written = writeQcow2(source);
    // Header, refcount table, a refcount block, a 32 KiB L1 table, 3 L2 tables, 4 blocks of 16 clusters.
    assert.equal(written.length, 65536 * (1 + 1 + 1 + 1 + 3 + 64));
    const { bytes, longest } = await drainTimed(written.bytes);
    // ~50 ms is the aim; the bound leaves room for a loaded machine.
    assert.ok(longest < 250, `the longest step took ${longest} ms`);
    const file = join(dir, "huge.qcow2");
    writeFileSync(file, bytes);
    assert.equal(qemuInfo(file)["virtual-size"], size);
    assertClean(file, written.length);
    assert.deepEqual(
      qemuDataMiB(file, "qcow2"),
      [
        [0, 1],
        [3, 1],
        [1_000_001, 1],
        [size / MiB - 1, 1],
      ],
    );
    assertQemuEqual(file, saveSparseRaw("huge.raw", size, blocks));
  });

  test("refused: a size off a sector or over 16 TiB, a bad backing name or format, and a source that breaks its word", async () => {
    const source = (virtualSize: number): DiskSource => ({ virtualSize, carried: () => false, blocks: async function* () {} });
    assert.throws(() => writeQcow2(source(MiB + 100)), /positive number of 512-byte sectors/);
    assert.throws(() => writeQcow2(source(17 * 1024 ** 4)), /over the .* \(16 TiB\)/);
    assert.throws(() => writeQcow2(source(MiB), { backingFile: "x".repeat(1024) }), /is not 1 to 1023 bytes/);
    assert.throws(() => writeQcow2(source(MiB), { backingFile: "base", backingFormat: "q c o w" }), /is not a format name/);
    assert.throws(() => writeQcow2(source(MiB), { backingFormat: "raw" }), /a backing format without a backing file/);
    for (const [bad, reason] of faultySources()) {
      await assert.rejects(async () => {
        for await (const piece of writeQcow2(bad).bytes) void piece;
      }, reason);
    }
  });
});
