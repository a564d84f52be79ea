// The qcow2 reader against images Debian's qemu-img writes (compat 0.10 and 1.1, 512 B to 2 MiB clusters,
// deflate- and zstd-compressed, zero clusters), one rewritten with its tables after its data (checked by
// qemu-img), applied over a target full of garbage; and the malformations a stream can bring.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { openQcow2 } from "./qcow2.ts";
import { applyRuns, assertRefusals, readerOf } from "./testing.ts";

const MiB = 1024 * 1024;
const dir = mkdtempSync(join(tmpdir(), "hangar-qcow2-"));
const spillDir = mkdtempSync(join(tmpdir(), "hangar-qcow2-spill-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillDir, { recursive: true, force: true });
});

/** A 12 MiB disk: data in a few places (one a lone sector), compressible text, zeros elsewhere. */
function rawDisk(): Buffer {
  const raw = Buffer.alloc(12 * MiB);
  for (let i = 0; i < 2 * MiB; i++) raw[i] = (i * 7 + 3) & 0xff;
  raw.fill(0x5a, 5 * MiB + 512, 5 * MiB + 1024);
  Buffer.from("Hangar moves disks. ".repeat(60_000)).copy(raw, 8 * MiB);
  raw.fill(0x77, 12 * MiB - 4096);
  return raw;
}
const raw = rawDisk();
const rawFile = join(dir, "disk.raw");
writeFileSync(rawFile, raw);

function qemuImage(name: string, options: string[]): string {
  const image = join(dir, `${name}.qcow2`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", ...options, rawFile, image]);
  return image;
}

/** The file's bytes in pieces of `piece`, as a network delivers them. */
const open = (bytes: Buffer, options: { length?: boolean; piece?: number } = {}) => openQcow2(readerOf(bytes, options.piece), { length: options.length === false ? undefined : bytes.length, spillDir });

/** The image with its L1 and L2 tables moved after every data cluster (offsets rewritten), as a writer might leave it. */
function tablesLast(bytes: Buffer): Buffer {
  const clusterSize = 2 ** bytes.readUInt32BE(20);
  const l1Entries = bytes.readUInt32BE(36);
  const l1Offset = Number(bytes.readBigUInt64BE(40));
  const mask = 0x00fffffffffffe00n;
  const header = Buffer.from(bytes.subarray(0, clusterSize));
  const out: Buffer[] = [header];
  let end = clusterSize;
  // An empty refcount table: qemu-img check -r all rebuilds the refcounts from the tables.
  const place = (data: Buffer) => {
    const at = end;
    const padded = Buffer.alloc(Math.ceil(data.length / clusterSize) * clusterSize);
    data.copy(padded);
    out.push(padded);
    end += padded.length;
    return at;
  };
  header.writeBigUInt64BE(BigInt(place(Buffer.alloc(clusterSize))), 48);
  header.writeUInt32BE(1, 56);
  const l1 = Buffer.from(bytes.subarray(l1Offset, l1Offset + l1Entries * 8));
  const l2s: Array<[number, Buffer]> = [];
  // Data clusters first, in reverse disk order.
  for (let i = 0; i < l1Entries; i++) {
    const l2Offset = Number(l1.readBigUInt64BE(i * 8) & mask);
    if (l2Offset === 0) continue;
    const l2 = Buffer.from(bytes.subarray(l2Offset, l2Offset + clusterSize));
    for (let j = clusterSize / 8 - 1; j >= 0; j--) {
      const entry = l2.readBigUInt64BE(j * 8);
      const host = Number(entry & mask);
      if (host === 0 || (entry & (1n << 62n)) !== 0n) continue;
      l2.writeBigUInt64BE((entry & ~mask) | BigInt(place(bytes.subarray(host, host + clusterSize))), j * 8);
    }
    l2s.push([i, l2]);
  }
  for (const [i, l2] of l2s) l1.writeBigUInt64BE((l1.readBigUInt64BE(i * 8) & ~mask) | BigInt(place(l2)), i * 8);
  const newL1 = place(l1);
  header.writeBigUInt64BE(BigInt(newL1), 40);
  return Buffer.concat(out);
}

describe("qcow2 images read as a stream", () => {
  const images: Array<[string, string[]]> = [
    ["v2 (compat 0.10)", ["-o", "compat=0.10"]],
    ["v3 (compat 1.1)", ["-o", "compat=1.1"]],
    ["512-byte clusters", ["-o", "cluster_size=512"]],
    ["2 MiB clusters", ["-o", "cluster_size=2M"]],
    ["deflate-compressed (-c)", ["-c"]],
    ["deflate-compressed v2", ["-c", "-o", "compat=0.10"]],
    ["zstd-compressed", ["-c", "-o", "compression_type=zstd"]],
  ];
  for (const [what, options] of images) {
    test(`${what}: every byte as qemu-img wrote it, what it leaves out as zeros over garbage`, async () => {
      const bytes = readFileSync(qemuImage(what.replace(/\W+/g, "-"), options));
      const image = await open(bytes);
      assert.equal(image.virtualSize, raw.length);
      assert.ok((await applyRuns(image)).equals(raw));
      assert.deepEqual(readdirSync(spillDir), [], "no spill file is left");
    });
  }

  test("in 1-byte and 4 KiB pieces, and without the file's length", async () => {
    const bytes = readFileSync(qemuImage("pieces", ["-c"]));
    for (const piece of [1, 4096]) assert.ok((await applyRuns(await open(bytes, { piece, length: piece === 1 }))).equals(raw), `pieces of ${piece}`);
    assert.ok((await applyRuns(await open(bytes, { length: false }))).equals(raw));
  });

  test("tables after their data (a rewritten image qemu-img checks and compares equal): the clusters are kept aside, then written", async () => {
    const rewritten = tablesLast(readFileSync(qemuImage("ordered", [])));
    const file = join(dir, "tables-last.qcow2");
    writeFileSync(file, rewritten);
    execFileSync("qemu-img", ["check", "-r", "all", file], { stdio: "pipe" });
    execFileSync("qemu-img", ["compare", "-f", "qcow2", "-F", "raw", file, rawFile]);
    // The reader gets the file as written (no refcounts), not as repaired.
    assert.ok((await applyRuns(await open(rewritten))).equals(raw));
    assert.deepEqual(readdirSync(spillDir), [], "the spill file is removed");
  });

  test("zero clusters (v3) read as zeros though preallocated", async () => {
    const file = qemuImage("zeroed", ["-o", "compat=1.1"]);
    execFileSync("qemu-io", ["-f", "qcow2", "-c", "write -z 0 1M", file]);
    const expected = Buffer.from(raw);
    expected.fill(0, 0, MiB);
    assert.ok((await applyRuns(await open(readFileSync(file)))).equals(expected));
  });

  test("malformations are refused in words naming the byte: backing file, encryption, bad L1/L2 entries, overlaps, truncation, a cluster inflating wrong", async () => {
    const plain = readFileSync(qemuImage("bad", ["-o", "compat=1.1"]));
    const compressed = readFileSync(qemuImage("bad-c", ["-c"]));
    const clusterSize = 2 ** plain.readUInt32BE(20);
    const l1Offset = Number(plain.readBigUInt64BE(40));
    const l2Offset = Number(plain.readBigUInt64BE(l1Offset) & 0x00fffffffffffe00n);
    const edit = (source: Buffer, change: (b: Buffer) => void) => {
      const copy = Buffer.from(source);
      change(copy);
      return copy;
    };
    const cases: Array<[string, Buffer, RegExp]> = [
      ["a backing file", edit(plain, (b) => b.writeBigUInt64BE(4096n, 8)), /has a backing file.*at byte 8/],
      ["encryption", edit(plain, (b) => b.writeUInt32BE(1, 32)), /encrypted.*at byte 32/],
      ["version 4", edit(plain, (b) => b.writeUInt32BE(4, 4)), /version 4.*at byte 4/],
      ["an L1 entry off a cluster boundary", edit(plain, (b) => b.writeBigUInt64BE(BigInt(l2Offset + 512), l1Offset)), new RegExp(`not a cluster boundary \\(at byte ${l1Offset}\\)`)],
      ["an L1 entry past the file", edit(plain, (b) => b.writeBigUInt64BE(BigInt(plain.length + clusterSize), l1Offset)), /ends past the file/],
      ["an L2 entry into the header", edit(plain, (b) => b.writeBigUInt64BE(0n | 512n, l2Offset)), /inside the header cluster|not a cluster boundary/],
      ["an L2 entry naming the L2 table itself", edit(plain, (b) => b.writeBigUInt64BE(BigInt(l2Offset), l2Offset)), /two tables name the bytes|overlaps/],
      ["a cut file", plain.subarray(0, l2Offset + clusterSize + 1000), /ends past the file's \d+ bytes \(at byte \d+\)/],
      ["a compressed cluster cut", edit(compressed, (b) => b.fill(0xff, b.length - 3000, b.length - 1000)), /does not inflate|inflates to/],
      ["a corrupt-marked image", edit(plain, (b) => b.writeBigUInt64BE(2n, 72)), /marked corrupt.*at byte 72/],
      ["a virtual size beyond the L1 table", edit(plain, (b) => b.writeBigUInt64BE(1n << 45n, 24)), /L1 entries for a disk that needs/],
    ];
    await assertRefusals(cases, (bytes) => open(bytes));
    assert.deepEqual(readdirSync(spillDir), [], "no spill file is left after a failure");
  });
});
