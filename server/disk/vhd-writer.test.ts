// The VHD writer against real readers: Debian's qemu-img (which takes the size from the footer only when told to,
// and reads a differencing disk on its own, ignoring parent and bitmaps), libvhdi (python3-libvhdi, which follows
// the parent through the header and reads the sector bitmaps) and our own reader; dynamic and differencing disks,
// sizes off the 2 MiB block, an all-zero disk, a seeded random block map, a 2040 GiB sparse disk, and sources
// that break their word.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { bufferSource, type DiskSource, SOURCE_BLOCK } from "./source.ts";
import { applyRuns, drainTimed, hugeSparseSource, qemuDataMiB, randomDelta, readerOf, sampleDisk, faultySources, saveFile, saveSparseFile, saveWritten } from "./testing.ts";
import { openVhd } from "./vhd.ts";
import { geometry, writeVhd, type VhdWriteOptions } from "./vhd-writer.ts";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "hangar-vhd-writer-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const BASE_UUID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const BASE_TIME = new Date("2024-03-01T12:00:00Z");
const options: VhdWriteOptions = { uuid: BASE_UUID, timestamp: BASE_TIME };
const SECONDS_2000 = Date.UTC(2000, 0, 1) / 1000;

/** qemu-img as an administrator runs it: with no option, it must read the footer's size (the creator is one it trusts). */
const qemuInfo = (file: string) => JSON.parse(execFileSync("qemu-img", ["info", "--output=json", "-f", "vpc", file], { encoding: "utf8" })) as { format: string; "virtual-size": number };

const saveSparseRaw = (name: string, size: number, blocks: Map<number, Buffer>) => saveSparseFile(join(dir, name), size, blocks);
const saveRaw = (name: string, raw: Buffer) => saveFile(join(dir, name), raw);

/** Whether qemu-img compare finds the VHD equal to the raw file (exit 0), with its word when it does not. */
function assertQemuEqual(vhd: string, raw: string): void {
  execFileSync("qemu-img", ["compare", "-f", "vpc", "-F", "raw", vhd, raw], { stdio: "pipe" });
}

const hasLibvhdi = (() => {
  try {
    execFileSync("/usr/bin/python3", ["-c", "import pyvhdi"], { stdio: "pipe" });
    return true;
  } catch {
    return false;
  }
})();

/** The disk libvhdi reads through `child`, its parent `parent` (if any) opened from the same directory. */
function libvhdiRead(child: string, parent?: string): Buffer {
  const script = `
import sys, pyvhdi
def open_(path):
    f = pyvhdi.file()
    f.open(path)
    return f
child = open_(sys.argv[1])
# Held here: libvhdi keeps no reference to the parent it is given.
parent = open_(sys.argv[2]) if len(sys.argv) > 2 else None
if parent is not None:
    child.set_parent(parent)
size = child.get_media_size()
out = sys.stdout.buffer
done = 0
while done < size:
    piece = child.read_buffer(min(1 << 20, size - done))
    out.write(piece)
    done += len(piece)
`;
  return execFileSync("/usr/bin/python3", ["-c", script, child, ...(parent === undefined ? [] : [parent])], { maxBuffer: 1 << 30 });
}

const uuidOf = (bytes: Buffer, at: number) => bytes.toString("hex", at, at + 16).replace(/^(.{8})(.{4})(.{4})(.{4})/, "$1-$2-$3-$4-");

/** A disk of `size` bytes, data in blocks 0, 2, the middle and the last (which may be short), zeros elsewhere. */
function diskOf(size: number): Buffer {
  const raw = Buffer.alloc(size);
  const last = Math.ceil(size / SOURCE_BLOCK) - 1;
  for (const index of [0, 2, Math.floor(last / 2), last]) for (let i = index * SOURCE_BLOCK; i < Math.min(size, (index + 1) * SOURCE_BLOCK); i++) raw[i] = (i * 31 + index) & 0xff;
  return raw;
}

describe("VHD writer", () => {
  const sizes: Array<[string, Buffer]> = [
    ["the 40 MiB sample disk", sampleDisk()],
    ["a size off the 2 MiB block (40 MiB + 3 sectors), data in its short last block", diskOf(40 * MiB + 3 * 512)],
    ["an odd size one block past 2 MiB blocks (39 MiB + 1 sector)", diskOf(39 * MiB + 512)],
    ["an all-zero disk (no block at all)", Buffer.alloc(8 * MiB)],
  ];
  for (const [what, raw] of sizes) {
    test(`a dynamic VHD of ${what}: qemu-img and our reader read the disk, the length is the file's`, async () => {
      const name = what.replace(/\W+/g, "-").slice(0, 40);
      const rawFile = saveRaw(`${name}.raw`, raw);
      const file = join(dir, `${name}.vhd`);
      const written = writeVhd(bufferSource(raw), options);
      const bytes = await saveWritten(file, written);
      assert.equal(statSync(file).size, written.length);
      const info = qemuInfo(file);
      assert.equal(info.format, "vpc");
      assert.equal(info["virtual-size"], raw.length);
      assertQemuEqual(file, rawFile);
      const image = await openVhd(readerOf(bytes), bytes.length);
      assert.equal(image.differencing, false);
      assert.ok((await applyRuns(image)).equals(raw), "our reader reads the disk");
      if (hasLibvhdi) assert.ok(libvhdiRead(file).equals(raw), "libvhdi reads the disk");
    });
  }

  test("the footer and header hold what the spec and xapi's files do, the same bytes each time", async () => {
    const raw = sampleDisk();
    const bytes = await saveWritten(join(dir, "fields.vhd"), writeVhd(bufferSource(raw), options));
    const again = await saveWritten(join(dir, "fields-again.vhd"), writeVhd(bufferSource(raw), options));
    assert.equal(createHash("sha256").update(bytes).digest("hex"), createHash("sha256").update(again).digest("hex"), "same inputs, same bytes");
    const footer = bytes.subarray(bytes.length - 512);
    assert.ok(footer.equals(bytes.subarray(0, 512)), "the copy at byte 0 is the footer");
    assert.equal(footer.toString("latin1", 0, 8), "conectix");
    assert.equal(footer.readUInt32BE(8), 2);
    assert.equal(footer.readUInt32BE(12), 0x00010000);
    assert.equal(footer.readBigUInt64BE(16), 512n);
    assert.equal(footer.readUInt32BE(24), BASE_TIME.getTime() / 1000 - SECONDS_2000);
    assert.equal(footer.toString("latin1", 28, 32), "tap\0");
    assert.equal(footer.toString("latin1", 36, 40), "Wi2k");
    assert.equal(footer.readBigUInt64BE(40), BigInt(raw.length));
    assert.equal(footer.readBigUInt64BE(48), BigInt(raw.length));
    assert.equal(footer.readUInt32BE(60), 3);
    assert.equal(uuidOf(footer, 68), BASE_UUID);
    const header = bytes.subarray(512, 1536);
    assert.equal(header.toString("latin1", 0, 8), "cxsparse");
    assert.equal(header.readBigUInt64BE(16), 2048n, "the BAT at 2048, as xapi puts it");
    assert.equal(header.readUInt32BE(28), 20);
    assert.equal(header.readUInt32BE(32), 2 * MiB);
    // Blocks 0 and 1 (data in bytes 0..3 MiB), 8 (the sector at 17 MiB) and 18, 19 (37..40 MiB), in disk order.
    const first = 2048 + 512;
    const bat = [...Array(20).keys()].map((i) => bytes.readUInt32BE(2048 + i * 4));
    const sector = (n: number) => (first + n * (512 + 2 * MiB)) / 512;
    assert.deepEqual(bat, [sector(0), sector(1), ...Array(6).fill(0xffffffff), sector(2), ...Array(9).fill(0xffffffff), sector(3), sector(4)]);
    assert.ok(bytes.subarray(first, first + 512).every((byte) => byte === 0xff), "a dynamic disk's bitmap is all set");
  });

  test("the disk geometry by the spec's CHS algorithm, as vhd-util and qemu compute it", () => {
    const chs = (size: number) => {
      const g = geometry(size);
      return [g >>> 16, (g >> 8) & 0xff, g & 0xff];
    };
    assert.deepEqual(chs(10 * MiB), [301, 4, 17]);
    assert.deepEqual(chs(40 * MiB), [963, 5, 17]);
    assert.deepEqual(chs(1024 * MiB), [2080, 16, 63]);
    assert.deepEqual(chs(127 * 1024 * MiB), [65278, 16, 255]);
    assert.deepEqual(chs(2040 * 1024 * MiB), [65535, 16, 255]);
  });

  test("a differencing VHD of the blocks that differ: read through its parent (libvhdi, our reader) it is the newer disk", async (t) => {
    const base = sampleDisk();
    const newer = Buffer.from(base);
    // Block 1 changes (block 0 of its 2 MiB pair is left to the parent), block 5 gains data (its pair-mate 4 is
    // not carried), block 37 becomes zeros (a carried block of zeros hides the parent's data), the sector at 17 MiB
    // + 512 changes and the last block changes.
    newer.fill(0x11, 1 * MiB + 4096, 1 * MiB + 8192);
    newer.fill(0x22, 5 * MiB, 6 * MiB);
    newer.fill(0, 37 * MiB, 38 * MiB);
    newer.fill(0x33, 17 * MiB + 512, 17 * MiB + 1024);
    newer[40 * MiB - 1] = 0x44;
    const differs = (index: number) => !base.subarray(index * MiB, (index + 1) * MiB).equals(newer.subarray(index * MiB, (index + 1) * MiB));
    const baseFile = join(dir, "base.vhd");
    const baseBytes = await saveWritten(baseFile, writeVhd(bufferSource(base), options));
    const deltaFile = join(dir, "delta.vhd");
    const parent = { uuid: uuidOf(baseBytes, 68), name: "base.vhd", timestamp: BASE_TIME };
    const written = writeVhd(bufferSource(newer, differs), { uuid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", timestamp: new Date("2024-03-02T12:00:00Z"), parent });
    const bytes = await saveWritten(deltaFile, written);
    assert.equal(statSync(deltaFile).size, written.length);

    const image = await openVhd(readerOf(bytes), bytes.length);
    assert.equal(image.differencing, true);
    assert.ok((await applyRuns(image, Buffer.from(base))).equals(newer), "our reader's runs over the base make the newer disk");
    await t.test("libvhdi, following the header to its parent, reads the newer disk", { skip: hasLibvhdi ? false : "python3-libvhdi is not installed" }, () => {
      assert.ok(libvhdiRead(deltaFile, baseFile).equals(newer));
    });

    // qemu reads a differencing VHD alone: what the file holds (zeros where the bitmap says "the parent's").
    const alone = Buffer.alloc(newer.length);
    for (let index = 0; index < 40; index++) if (differs(index)) newer.copy(alone, index * MiB, index * MiB, (index + 1) * MiB);
    const info = qemuInfo(deltaFile);
    assert.equal(info.format, "vpc");
    assert.equal(info["virtual-size"], newer.length);
    assertQemuEqual(deltaFile, saveRaw("delta-alone.raw", alone));

    const footer = bytes.subarray(bytes.length - 512);
    assert.equal(footer.readUInt32BE(60), 4, "disk type differencing");
    const header = bytes.subarray(512, 1536);
    assert.equal(uuidOf(header, 40), parent.uuid);
    assert.equal(header.readUInt32BE(56), BASE_TIME.getTime() / 1000 - SECONDS_2000);
    assert.equal(Buffer.from(header.subarray(64, 64 + 16)).swap16().toString("utf16le"), "base.vhd");
    assert.ok(header.subarray(64 + 16, 576).every((byte) => byte === 0));
    const locators = [0, 1, 2].map((i) => {
      const entry = 576 + i * 24;
      const at = Number(header.readBigUInt64BE(entry + 16));
      const data = bytes.subarray(at, at + header.readUInt32BE(entry + 8));
      return [header.toString("latin1", entry, entry + 4), header.readUInt32BE(entry + 4), data.toString(i === 0 ? "utf8" : "utf16le")];
    });
    assert.deepEqual(locators, [
      ["MacX", 512, "file://./base.vhd"],
      ["W2ku", 512, ".\\base.vhd"],
      ["W2ru", 512, ".\\base.vhd"],
    ]);
    assert.ok(header.subarray(576 + 3 * 24, 768).every((byte) => byte === 0), "the other locators are empty");
    // Block 0 of the file is disk block 0 (pair 0, 1): only the second half's sectors are marked.
    const firstBlock = bytes.readUInt32BE(2048) * 512;
    assert.ok(bytes.subarray(firstBlock, firstBlock + 256).every((byte) => byte === 0));
    assert.ok(bytes.subarray(firstBlock + 256, firstBlock + 512).every((byte) => byte === 0xff));
  });

  test("a seeded random block map on an 8 MiB + 3 sector disk: dynamic (qemu-img) and differencing (our reader, libvhdi)", async () => {
    const size = 8 * MiB + 3 * 512;
    for (let seed = 1; seed <= 4; seed++) {
      const { base, newer, carried, whole: full } = randomDelta(seed, size);
      const fullFile = join(dir, `random-${seed}.vhd`);
      await saveWritten(fullFile, writeVhd(bufferSource(newer, (index) => carried.has(index)), options));
      assertQemuEqual(fullFile, saveRaw(`random-${seed}.raw`, full));

      const baseFile = join(dir, `random-base-${seed}.vhd`);
      const baseBytes = await saveWritten(baseFile, writeVhd(bufferSource(base, () => true), options));
      const deltaFile = join(dir, `random-delta-${seed}.vhd`);
      const delta = await saveWritten(deltaFile, writeVhd(bufferSource(newer, (index) => carried.has(index)), { ...options, parent: { uuid: uuidOf(baseBytes, 68), name: `random-base-${seed}.vhd`, timestamp: BASE_TIME } }));
      assert.ok((await applyRuns(await openVhd(readerOf(delta), delta.length), Buffer.from(base))).equals(newer), `seed ${seed}: our reader over the base`);
      if (hasLibvhdi) assert.ok(libvhdiRead(deltaFile, baseFile).equals(newer), `seed ${seed}: libvhdi through the parent`);
    }
  });

  test("a 2040 GiB sparse disk: a 4 MiB BAT, written in short steps, read equal by qemu-img", async () => {
    const size = 2040 * 1024 * MiB;
    const { source, blocks } = hugeSparseSource(size);
    const written = writeVhd(source, options);
    assert.equal(written.length, 2048 + (size / (2 * MiB)) * 4 + 4 * (512 + 2 * MiB) + 512);
    const { bytes, longest } = await drainTimed(written.bytes);
    // ~50 ms is the aim; the bound leaves room for a loaded machine.
    assert.ok(longest < 250, `the longest step took ${longest} ms`);
    const file = join(dir, "huge.vhd");
    writeFileSync(file, bytes);
    assert.equal(statSync(file).size, written.length);
    assert.equal(qemuInfo(file)["virtual-size"], size);
    assert.deepEqual(
      qemuDataMiB(file, "vpc"),
      [
        [0, 2],
        [2, 2],
        [1_000_000, 2],
        [size / MiB - 2, 2],
      ],
    );
    assertQemuEqual(file, saveSparseRaw("huge.raw", size, blocks));
  });

  test("refused: a disk over 2040 GiB or off a sector, a bad uuid or parent name, and a source that breaks its word", async () => {
    const source = (virtualSize: number): DiskSource => ({ virtualSize, carried: () => false, blocks: async function* () {} });
    assert.throws(() => writeVhd(source(2040 * 1024 * MiB + 512), options), /over the VHD limit of 2040 GiB/);
    assert.throws(() => writeVhd(source(MiB + 100), options), /positive number of 512-byte sectors/);
    assert.throws(() => writeVhd(source(MiB), { ...options, uuid: "nope" }), /"nope" is not a uuid/);
    assert.throws(() => writeVhd(source(MiB), { ...options, timestamp: new Date("1999-12-31T23:59:59Z") }), /outside what a VHD time stamp holds/);
    assert.throws(() => writeVhd(source(MiB), { ...options, parent: { uuid: BASE_UUID, name: "../base.vhd", timestamp: BASE_TIME } }), /is not a file name/);
    for (const [bad, reason] of faultySources()) {
      await assert.rejects(async () => {
        for await (const piece of writeVhd(bad, options).bytes) void piece;
      }, reason);
    }
  });
});
