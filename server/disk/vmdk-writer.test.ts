// The streamOptimized VMDK writer, checked by Debian's qemu-img (info, check, compare against the raw disk; a
// delta over its parent with --backing-chain) and by the repo's own reader, with its layout walked as VMware's
// technote describes it: grains in disk order, each grain table behind a marker after its grains, the directory,
// the footer and the end-of-stream marker.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { inflateSync } from "node:zlib";
import { bufferSource, carriedMap, type DiskSource } from "./source.ts";
import { applyRuns, readerOf, sampleDisk } from "./testing.ts";
import { GD_AT_END, openVmdk } from "./vmdk.ts";
import { vmdkCid, vmdkLength, writeVmdk, type VmdkWriteOptions } from "./vmdk-writer.ts";

const SECTOR = 512;
const GRAIN = 65_536;
const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "hangar-vmdk-writer-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-vmdk-writer-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

async function write(source: DiskSource, options: VmdkWriteOptions): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of writeVmdk(source, options)) pieces.push(piece);
  return Buffer.concat(pieces);
}

function save(name: string, bytes: Buffer): string {
  const file = join(dir, name);
  writeFileSync(file, bytes);
  return file;
}

const qemu = (...args: string[]) => execFileSync("qemu-img", args, { cwd: dir, stdio: "pipe" }).toString();

interface QemuInfo {
  format: string;
  "virtual-size": number;
  "backing-filename"?: string;
  "format-specific": { data: { cid: number; "parent-cid": number; "create-type": string; extents: Array<{ compressed: boolean }> } };
}

/** qemu-img's view of the image (and its backing chain), its check, and its verdict against the raw disk. */
function qemuChecks(vmdk: string, raw: string): QemuInfo[] {
  const chain = JSON.parse(qemu("info", "--output=json", "--backing-chain", vmdk)) as QemuInfo[];
  assert.match(qemu("check", vmdk), /No errors were found/);
  assert.match(qemu("compare", "-f", "vmdk", "-F", "raw", vmdk, raw), /Images are identical/);
  return chain;
}

interface Layout {
  header: Buffer;
  descriptor: string;
  grains: Array<{ sector: number; lba: number; data: Buffer }>;
  /** Each table: its directory slot, file sector and entries. */
  tables: Array<{ slot: number; sector: number; entries: number[] }>;
  gd: number[];
}

/** The file walked as VMware's technote lays it out, every step asserted. */
function layout(bytes: Buffer): Layout {
  const header = bytes.subarray(0, SECTOR);
  assert.equal(header.toString("latin1", 0, 4), "KDMV");
  assert.equal(header.readUInt32LE(4), 3);
  assert.equal(header.readUInt32LE(8), 0x30001, "newline test, compressed grains, markers");
  assert.equal(header.readBigUInt64LE(20), 128n);
  assert.equal(header.readBigUInt64LE(56), GD_AT_END);
  assert.equal(header.toString("latin1", 73, 77), "\n \r\n");
  assert.equal(header.readUInt16LE(77), 1);
  const capacity = Number(header.readBigUInt64LE(12));
  const descriptorAt = Number(header.readBigUInt64LE(28)) * SECTOR;
  const descriptor = bytes.toString("utf8", descriptorAt, descriptorAt + Number(header.readBigUInt64LE(36)) * SECTOR).replace(/\0+$/, "");
  const gdEntries = Math.ceil(capacity / (128 * 512));
  const grains: Layout["grains"] = [];
  const tables: Layout["tables"] = [];
  let at = Number(header.readBigUInt64LE(64)) * SECTOR;
  for (;;) {
    const size = bytes.readUInt32LE(at + 8);
    if (size !== 0) {
      const lba = Number(bytes.readBigUInt64LE(at));
      if (grains.length > 0) assert.ok(lba > grains.at(-1)!.lba, "grains in disk order");
      grains.push({ sector: at / SECTOR, lba, data: inflateSync(bytes.subarray(at + 12, at + 12 + size)) });
      at += Math.ceil((12 + size) / SECTOR) * SECTOR;
      continue;
    }
    const type = bytes.readUInt32LE(at + 12);
    if (type === 2) break;
    assert.equal(type, 1, "grain table markers until the directory's");
    assert.equal(bytes.readBigUInt64LE(at), 4n);
    const entries = Array.from({ length: 512 }, (_, i) => bytes.readUInt32LE(at + SECTOR + i * 4));
    const slot = Math.floor(grains.at(-1)!.lba / 128 / 512);
    assert.ok(tables.every((t) => t.slot < slot), "a table follows its grains, tables in disk order");
    tables.push({ slot, sector: at / SECTOR + 1, entries });
    at += 5 * SECTOR;
  }
  // The directory, the footer (the header with the directory's offset), the end of the stream.
  assert.equal(bytes.readUInt32LE(at + 12), 2, "the directory's marker");
  const gdSectors = Math.ceil((gdEntries * 4) / SECTOR);
  assert.equal(bytes.readBigUInt64LE(at), BigInt(gdSectors));
  const gd = Array.from({ length: gdEntries }, (_, i) => bytes.readUInt32LE(at + SECTOR + i * 4));
  const footerAt = at + SECTOR + gdSectors * SECTOR;
  assert.equal(bytes.readBigUInt64LE(footerAt), 1n);
  assert.equal(bytes.readUInt32LE(footerAt + 12), 3, "the footer's marker");
  const footer = bytes.subarray(footerAt + SECTOR, footerAt + 2 * SECTOR);
  assert.equal(footer.readBigUInt64LE(56), BigInt(at / SECTOR + 1));
  assert.ok(Buffer.concat([footer.subarray(0, 56), footer.subarray(64)]).equals(Buffer.concat([header.subarray(0, 56), header.subarray(64)])));
  assert.ok(bytes.subarray(footerAt + 2 * SECTOR).equals(Buffer.alloc(SECTOR)), "the end-of-stream marker ends the file");
  // Every directory entry names its table, every table entry its grain.
  for (const [slot, sector] of gd.entries()) assert.equal(sector, tables.find((t) => t.slot === slot)?.sector ?? 0);
  const mapped = tables.flatMap((t) => t.entries.map((sector, i) => ({ grain: t.slot * 512 + i, sector })).filter((e) => e.sector !== 0));
  assert.deepEqual(
    mapped,
    grains.map((g) => ({ grain: g.lba / 128, sector: g.sector })),
  );
  return { header, descriptor, grains, tables, gd };
}

/** The 64 KiB grains of `disk` that are not all zeros. */
const nonZeroGrains = (disk: Buffer) => Array.from({ length: Math.ceil(disk.length / GRAIN) }, (_, i) => i).filter((i) => disk.subarray(i * GRAIN, (i + 1) * GRAIN).some((b) => b !== 0));

describe("streamOptimized VMDKs written as VMware lays them out", () => {
  const sample = sampleDisk();
  const disks: Array<[string, Buffer]> = [
    ["40 MiB", sample],
    ["40 MiB and 3 sectors (the last grain short)", Buffer.concat([sample, Buffer.alloc(3 * SECTOR, 0x33)])],
    ["all zeros", Buffer.alloc(40 * MiB)],
  ];
  for (const [what, disk] of disks) {
    test(`${what}: qemu-img reads it (info, check, compare) and so does openVmdk; a grain for each non-zero grain only`, async () => {
      const name = `${what.split(" ")[0]}-${disk.length}.vmdk`;
      const cid = vmdkCid(name);
      const bytes = await write(bufferSource(disk), { fileName: name, cid });
      const [info] = qemuChecks(save(name, bytes), save(`${name}.raw`, disk));
      assert.equal(info!.format, "vmdk");
      assert.equal(info!["virtual-size"], disk.length);
      assert.equal(info!["format-specific"].data["create-type"], "streamOptimized");
      assert.equal(info!["format-specific"].data.cid, parseInt(cid, 16));
      assert.equal(info!["format-specific"].data["parent-cid"], 0xffffffff);
      assert.equal(info!["format-specific"].data.extents[0]!.compressed, true);

      const { descriptor, grains } = layout(bytes);
      assert.match(descriptor, new RegExp(`^RW ${disk.length / SECTOR} SPARSE "${name}"$`, "m"));
      assert.match(descriptor, /^ddb\.adapterType = "lsilogic"$/m);
      assert.deepEqual(
        grains.map((g) => g.lba / 128),
        nonZeroGrains(disk),
      );
      for (const g of grains) assert.ok(g.data.equals(disk.subarray(g.lba * SECTOR, g.lba * SECTOR + GRAIN)), "a grain holds what is inside the disk, no more");

      const image = await openVmdk(readerOf(bytes, 4096), { length: bytes.length, spillDir });
      assert.equal(image.virtualSize, disk.length);
      assert.ok((await applyRuns(image)).equals(disk));
    });
  }

  test("sized: stored grains, zero ones too, in exactly the length vmdkLength says before the first byte; qemu-img reads it", async () => {
    const cases: Array<[string, Buffer, ((index: number) => boolean) | undefined]> = [
      ["sample", sample, undefined],
      ["short tail", Buffer.concat([sample, Buffer.alloc(3 * SECTOR + 100, 0x44)]), undefined],
      ["a carried zero block past a table", Buffer.alloc(70 * MiB), (index) => index === 0 || index === 33 || index === 69],
    ];
    for (const [what, disk, carried] of cases) {
      const source = bufferSource(disk, carried);
      const bytes = await write(source, { fileName: `${what}.vmdk`, cid: "12345678", sized: true });
      assert.equal(bytes.length, vmdkLength(carriedMap(source), disk.length), what);
      const padded = Buffer.concat([disk, Buffer.alloc((SECTOR - (disk.length % SECTOR)) % SECTOR)]);
      qemuChecks(save(`sized-${disk.length}.vmdk`, bytes), save(`sized-${disk.length}.raw`, padded));
      const image = await openVmdk(readerOf(bytes, 4096), { length: bytes.length, spillDir });
      assert.ok((await applyRuns(image)).subarray(0, disk.length).equals(disk), what);
    }
  });

  test("a delta names its parent; qemu-img reads it over the base's file, its zero grains hiding the base's", async () => {
    const base = sampleDisk();
    const newer = Buffer.from(base);
    newer.fill(0, 1 * MiB, 2 * MiB); // data cleared: the delta must say zeros
    newer.fill(0x77, 20 * MiB, 21 * MiB);
    newer[39 * MiB + 5] = 1;
    const differs = (i: number) => !base.subarray(i * MiB, (i + 1) * MiB).equals(newer.subarray(i * MiB, (i + 1) * MiB));
    const baseCid = vmdkCid("base-vdi");
    save("base.vmdk", await write(bufferSource(base), { fileName: "base.vmdk", cid: baseCid }));
    const bytes = await write(bufferSource(newer, differs), { fileName: "delta.vmdk", cid: vmdkCid("delta-vdi"), parent: { fileName: "base.vmdk", cid: baseCid } });
    const delta = save("delta.vmdk", bytes);
    const [top, parent] = qemuChecks(delta, save("newer.raw", newer));
    assert.equal(top!["backing-filename"], "base.vmdk");
    assert.equal(top!["format-specific"].data["parent-cid"], parseInt(baseCid, 16));
    assert.equal(top!["format-specific"].data["create-type"], "streamOptimized");
    assert.equal(parent!["format-specific"].data.cid, parseInt(baseCid, 16));
    const againstBase = spawnSync("qemu-img", ["compare", "-f", "vmdk", "-F", "raw", delta, save("base.raw", base)]);
    assert.equal(againstBase.status, 1);
    assert.match(againstBase.stdout.toString(), /Content mismatch at offset 1048576/);

    const { descriptor, grains } = layout(bytes);
    assert.match(descriptor, new RegExp(`^parentCID=${baseCid}\nparentFileNameHint="base.vmdk"$`, "m"));
    // Every grain of the carried blocks (1, 20, 39), zero or not, and nothing else.
    assert.deepEqual(
      grains.map((g) => g.lba / 128),
      [1, 20, 39].flatMap((block) => Array.from({ length: 16 }, (_, i) => block * 16 + i)),
    );
    // The repo's reader takes whole disks only, and says so.
    await assert.rejects(async () => applyRuns(await openVmdk(readerOf(bytes), { length: bytes.length, spillDir })), /delta of another disk/);
  });

  test("a compression level other than the default reads the same; bad options are refused before any byte", async () => {
    const disk = sampleDisk();
    const fast = await write(bufferSource(disk), { fileName: "l1.vmdk", cid: "00000001" });
    const small = await write(bufferSource(disk), { fileName: "l9.vmdk", cid: "00000001", compressionLevel: 9 });
    assert.ok(small.length < fast.length);
    qemuChecks(save("l9.vmdk", small), save("l9.raw", disk));
    const source = bufferSource(Buffer.alloc(MiB));
    for (const [options, reason] of [
      [{ fileName: "a.vmdk", cid: "xyz" }, /content ID "xyz" is not 8 hex digits/],
      [{ fileName: 'a".vmdk', cid: "00000001" }, /cannot go in a descriptor/],
      [{ fileName: "a.vmdk", cid: "00000001", parent: { fileName: "b\n.vmdk", cid: "00000002" } }, /cannot go in a descriptor/],
      [{ fileName: "a.vmdk", cid: "00000001", compressionLevel: 0 }, /compression level 0/],
    ] as const) {
      await assert.rejects(writeVmdk(source, options).next(), reason);
    }
  });

  test("the event loop turns while grains are deflated", async () => {
    const disk = Buffer.alloc(8 * MiB);
    for (let i = 0; i < disk.length; i++) disk[i] = Math.imul(i, 2_654_435_761) >>> 24;
    let turned = false;
    setImmediate(() => (turned = true));
    const writer = writeVmdk(bufferSource(disk), { fileName: "busy.vmdk", cid: "00000001" });
    await writer.next(); // the header
    await writer.next(); // the first block's grains
    await writer.next();
    assert.ok(turned, "a macrotask ran before the second block was written");
    await writer.return(undefined);
  });
});
