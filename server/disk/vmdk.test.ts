// The VMDK reader against images Debian's qemu-img writes (monolithicSparse and streamOptimized), a
// streamOptimized one laid out as VMware writes it (grain directory at the end, table and footer markers) and a
// monolithicSparse one with its tables after its grains (both checked with qemu-img compare), applied over a
// target full of garbage; and the malformations a stream can bring.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { deflateSync } from "node:zlib";
import { applyRuns, assertRefusals, readerOf, sampleDisk } from "./testing.ts";
import { openVmdk } from "./vmdk.ts";

const SECTOR = 512;
const dir = mkdtempSync(join(tmpdir(), "hangar-vmdk-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-vmdk-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

const raw = sampleDisk();
const rawFile = join(dir, "disk.raw");
writeFileSync(rawFile, raw);

function qemuImage(name: string, options: string[], source = rawFile): Buffer {
  const image = join(dir, `${name}.vmdk`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "vmdk", ...options, source, image]);
  return readFileSync(image);
}

/** qemu-img compare's verdict on `bytes` written as a file against the raw disk. */
function sameAsRaw(name: string, bytes: Buffer): void {
  const file = join(dir, `${name}.vmdk`);
  writeFileSync(file, bytes);
  execFileSync("qemu-img", ["compare", "-f", "vmdk", "-F", "raw", file, rawFile], { stdio: "pipe" });
}

const open = (bytes: Buffer, options: { length?: boolean; piece?: number } = {}) => openVmdk(readerOf(bytes, options.piece), { length: options.length === false ? undefined : bytes.length, spillDir });

/** The grains of a qemu streamOptimized file: [file offset, disk sector, bytes with their 12-byte head]. */
function grainsOf(bytes: Buffer): Array<[number, bigint, Buffer]> {
  const grains: Array<[number, bigint, Buffer]> = [];
  for (let at = Number(bytes.readBigUInt64LE(64)) * SECTOR; ; ) {
    const size = bytes.readUInt32LE(at + 8);
    if (size === 0) break;
    const length = Math.ceil((12 + size) / SECTOR) * SECTOR;
    grains.push([at, bytes.readBigUInt64LE(at), bytes.subarray(at, at + length)]);
    at += length;
  }
  return grains;
}

const marker = (sectors: number, type: number) => {
  const m = Buffer.alloc(SECTOR);
  m.writeBigUInt64LE(BigInt(sectors), 0);
  m.writeUInt32LE(type, 12);
  return m;
};

/** qemu's streamOptimized file rewritten as VMware lays it out: grains, then each table and the directory behind markers, a footer, end of stream. */
function vmwareShape(bytes: Buffer): Buffer {
  const header = Buffer.from(bytes.subarray(0, SECTOR));
  const overHead = Number(header.readBigUInt64LE(64));
  const grainSize = Number(header.readBigUInt64LE(20));
  const gtes = header.readUInt32LE(44);
  const capacity = Number(header.readBigUInt64LE(12));
  const gdEntries = Math.ceil(capacity / (grainSize * gtes));
  header.writeBigUInt64LE(0xffffffffffffffffn, 56);
  const out: Buffer[] = [header, bytes.subarray(SECTOR, overHead * SECTOR)];
  let sector = overHead;
  const put = (b: Buffer) => {
    out.push(b);
    sector += b.length / SECTOR;
  };
  const tables = new Map<number, Buffer>();
  for (const [, lba, grain] of grainsOf(bytes)) {
    const index = Number(lba) / grainSize;
    const table = tables.get(Math.floor(index / gtes)) ?? Buffer.alloc(gtes * 4);
    tables.set(Math.floor(index / gtes), table);
    table.writeUInt32LE(sector, (index % gtes) * 4);
    put(grain);
  }
  const gd = Buffer.alloc(Math.ceil((gdEntries * 4) / SECTOR) * SECTOR);
  for (const [n, table] of tables) {
    put(marker(table.length / SECTOR, 1));
    gd.writeUInt32LE(sector, n * 4);
    put(table);
  }
  put(marker(gd.length / SECTOR, 2));
  const gdSector = sector;
  put(gd);
  put(marker(1, 3));
  const footer = Buffer.from(header);
  footer.writeBigUInt64LE(BigInt(gdSector), 56);
  put(footer);
  put(Buffer.alloc(SECTOR));
  return Buffer.concat(out);
}

/** qemu's monolithicSparse file with its grains in reverse disk order and its tables after them. */
function tablesLast(bytes: Buffer): Buffer {
  const header = Buffer.from(bytes.subarray(0, SECTOR));
  const grainBytes = Number(header.readBigUInt64LE(20)) * SECTOR;
  const gtes = header.readUInt32LE(44);
  const capacity = Number(header.readBigUInt64LE(12)) * SECTOR;
  const gdOffset = Number(header.readBigUInt64LE(56)) * SECTOR;
  const overHead = Number(header.readBigUInt64LE(64));
  const gdEntries = Math.ceil(capacity / (grainBytes * gtes));
  // No redundant directory: the flag is cleared, so qemu reads the one moved.
  header.writeUInt32LE(header.readUInt32LE(8) & ~2, 8);
  header.writeBigUInt64LE(0n, 48);
  const out: Buffer[] = [header, Buffer.alloc(overHead * SECTOR - SECTOR)];
  bytes.copy(out[1]!, 0, SECTOR, 21 * SECTOR);
  let sector = overHead;
  const put = (b: Buffer) => {
    out.push(b);
    const at = sector;
    sector += b.length / SECTOR;
    return at;
  };
  const tables: Buffer[] = [];
  for (let t = gdEntries - 1; t >= 0; t--) {
    const old = bytes.readUInt32LE(gdOffset + t * 4) * SECTOR;
    const table = Buffer.from(bytes.subarray(old, old + gtes * 4));
    for (let i = gtes - 1; i >= 0; i--) {
      const grain = table.readUInt32LE(i * 4);
      if (grain > 1) table.writeUInt32LE(put(bytes.subarray(grain * SECTOR, grain * SECTOR + grainBytes)), i * 4);
    }
    tables[t] = table;
  }
  const gd = Buffer.alloc(Math.ceil((gdEntries * 4) / SECTOR) * SECTOR);
  for (const [t, table] of tables.entries()) gd.writeUInt32LE(put(Buffer.concat([table, Buffer.alloc(SECTOR * Math.ceil(table.length / SECTOR) - table.length)])), t * 4);
  header.writeBigUInt64LE(BigInt(put(gd)), 56);
  return Buffer.concat(out);
}

describe("VMDK images read as a stream", () => {
  for (const subformat of ["monolithicSparse", "streamOptimized"]) {
    test(`${subformat} as qemu-img writes it: every byte, what it leaves out as zeros over garbage`, async () => {
      const image = await open(qemuImage(subformat, ["-o", `subformat=${subformat}`]));
      assert.equal(image.virtualSize, raw.length);
      assert.ok((await applyRuns(image)).equals(raw));
      assert.deepEqual(readdirSync(spillDir), []);
    });
  }

  test("a streamOptimized file that ends after its last grain without an end-of-stream marker, as qemu-img writes some", async () => {
    const bytes = qemuImage("no-eos", ["-o", "subformat=streamOptimized"]);
    const grains = grainsOf(bytes);
    const [lastAt, , last] = grains.at(-1)!;
    const cut = bytes.subarray(0, lastAt + last.length);
    assert.ok((await applyRuns(await open(cut, { length: false }))).equals(raw));
  });

  test("a disk that ends inside a grain, in 1-byte pieces and without the file's length", async () => {
    const odd = raw.subarray(0, raw.length - 3 * SECTOR);
    const oddFile = join(dir, "odd.raw");
    writeFileSync(oddFile, odd);
    const bytes = qemuImage("odd", ["-o", "subformat=streamOptimized"], oddFile);
    const image = await open(bytes, { piece: 1, length: false });
    assert.equal(image.virtualSize, odd.length);
    assert.ok((await applyRuns(image)).equals(odd));
  });

  test("streamOptimized as VMware lays it out (directory at the end, table, directory and footer markers), which qemu-img reads the same", async () => {
    const bytes = vmwareShape(qemuImage("vmware", ["-o", "subformat=streamOptimized"]));
    sameAsRaw("vmware-shaped", bytes);
    assert.ok((await applyRuns(await open(bytes))).equals(raw));
  });

  test("monolithicSparse with its tables after its grains, grains in reverse order (qemu-img reads it the same): grains kept aside, then written", async () => {
    const bytes = tablesLast(qemuImage("ordered", []));
    sameAsRaw("tables-last", bytes);
    assert.ok((await applyRuns(await open(bytes, { piece: 4096 }))).equals(raw));
    assert.deepEqual(readdirSync(spillDir), [], "the spill file is removed");
  });

  test("malformations are refused in words naming the byte", async () => {
    const sparse = qemuImage("bad", []);
    const stream = qemuImage("bad-so", ["-o", "subformat=streamOptimized"]);
    const gdOffset = Number(sparse.readBigUInt64LE(56)) * SECTOR;
    const gtOffset = sparse.readUInt32LE(gdOffset) * SECTOR;
    const [first, second] = grainsOf(stream);
    const edit = (source: Buffer, change: (b: Buffer) => void) => {
      const copy = Buffer.from(source);
      change(copy);
      return copy;
    };
    const descriptor = (b: Buffer, from: string, to: string) => {
      const at = b.indexOf(from, SECTOR, "latin1");
      b.write(to.padEnd(from.length, " "), at, "latin1");
    };
    const cases: Array<[string, Buffer, RegExp]> = [
      ["no magic", edit(sparse, (b) => b.write("XXXX", 0)), /no VMDK sparse extent magic.*at byte 0/],
      ["version 4", edit(sparse, (b) => b.writeUInt32LE(4, 4)), /version 4.*at byte 4/],
      ["sent as text", edit(sparse, (b) => b.write("\n \n\n", 73, "latin1")), /sent as text.*at byte 73/],
      ["a grain size of 3", edit(sparse, (b) => b.writeBigUInt64LE(3n, 20)), /grain size 3.*at byte 20/],
      ["a split extent", edit(sparse, (b) => descriptor(b, 'createType="monolithicSparse"', 'createType="twoGbMaxExtentSparse"')), /twoGbMaxExtentSparse.*one file/],
      ["a delta", edit(sparse, (b) => descriptor(b, "parentCID=ffffffff", "parentCID=12345678")), /delta of another disk/],
      ["a grain table past the file", edit(sparse, (b) => b.writeUInt32LE(sparse.length / SECTOR + 8, gdOffset)), new RegExp(`ends past the file.*at byte ${gdOffset}\\)`)],
      ["a grain over the descriptor", edit(sparse, (b) => b.writeUInt32LE(1, gtOffset)), new RegExp(`overlaps bytes already read.*at byte ${gtOffset}\\)`)],
      ["a cut sparse file", sparse.subarray(0, sparse.length - 70_000), /ends past the file's|ends before/],
      ["a grain past the disk", edit(stream, (b) => b.writeBigUInt64LE(1n << 40n, first![0])), /not the start of a grain inside the disk/],
      ["a grain twice", edit(stream, (b) => b.writeBigUInt64LE(first![1], second![0])), /a second grain for disk offset 0/],
      ["a grain that does not inflate", edit(stream, (b) => b.fill(0x55, first![0] + 14, first![0] + 40)), /does not inflate.*at byte/],
      ["an unknown marker", edit(stream, (b) => b.fill(0, first![0], first![0] + SECTOR).writeUInt32LE(9, first![0] + 12)), /marker type 9/],
      ["a stream cut before its end marker", stream.subarray(0, second![0] + 100), /the file ends inside/],
    ];
    await assertRefusals(cases, (bytes) => open(bytes));
    assert.deepEqual(readdirSync(spillDir), [], "no spill file is left after a failure");
  });

  test("a grain that inflates past its grain is refused", async () => {
    const stream = qemuImage("bomb", ["-o", "subformat=streamOptimized"]);
    const [first] = grainsOf(stream);
    const big = deflateSync(Buffer.alloc(1 << 20, 1));
    const grain = Buffer.alloc(Math.ceil((12 + big.length) / SECTOR) * SECTOR);
    grain.writeBigUInt64LE(first![1], 0);
    grain.writeUInt32LE(big.length, 8);
    big.copy(grain, 12);
    const bytes = Buffer.concat([stream.subarray(0, first![0]), grain, stream.subarray(first![0] + first![2].length)]);
    await assert.rejects((async () => applyRuns(await open(bytes)))(), /does not inflate to one grain/);
  });
});
