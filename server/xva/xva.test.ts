// The XVA writer and reader against each other, against GNU tar's three header formats and xxhsum, and
// against the malformed archives an importer must refuse.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createReadStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, describe, test } from "node:test";
import { pack as tarPack } from "tar-stream";
import { XVA_BLOCK_SIZE, blockChecksum, type XvaChecksumKind } from "./format.ts";
import { openXva, XvaChecksumError, XvaReadError, type XvaBlockRead } from "./reader.ts";
import { writeXva, XvaWriteError, type XvaBlock } from "./writer.ts";

const MiB = XVA_BLOCK_SIZE;
const work = mkdtempSync(join(tmpdir(), "xva-test-"));
after(() => rmSync(work, { recursive: true, force: true }));

/** A disk image with data in a few 1 MiB blocks, zeros elsewhere, and a short last block. */
function sparseDisk(size: number, dataBlocks: readonly number[], seed: number): Buffer {
  const disk = Buffer.alloc(size);
  for (const index of dataBlocks) {
    const end = Math.min(size, (index + 1) * MiB);
    for (let i = index * MiB; i < end; i++) disk[i] = (i * 31 + seed) & 0xff || 1;
  }
  return disk;
}

/** The blocks a caller sends: every non-zero block plus the first and last. */
async function* blocksOf(disk: Buffer): AsyncGenerator<XvaBlock> {
  const count = Math.ceil(disk.byteLength / MiB);
  for (let index = 0; index < count; index++) {
    const data = disk.subarray(index * MiB, Math.min(disk.byteLength, (index + 1) * MiB));
    if (index === 0 || index === count - 1 || data.some((byte) => byte !== 0)) yield { index, data };
  }
}

async function bytesOf(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

type ReadBack = { ovaXml: string; disks: Map<string, { image: Buffer; blocks: Omit<XvaBlockRead, "data">[] }> };

/** Reads an archive whole, rebuilding each disk image from its blocks' offsets. */
async function readBack(source: AsyncIterable<Uint8Array> | Readable, sizes: Map<string, number>): Promise<ReadBack> {
  const archive = await openXva(source);
  const disks: ReadBack["disks"] = new Map();
  for await (const disk of archive.disks(sizes)) {
    const image = Buffer.alloc(sizes.get(disk.ref)!);
    const blocks: Omit<XvaBlockRead, "data">[] = [];
    for await (const { data, ...block } of disk.blocks) {
      data.copy(image, block.offset);
      blocks.push(block);
    }
    disks.set(disk.ref, { image, blocks });
  }
  return { ovaXml: archive.ovaXml, disks };
}

/** A tar stream of exactly these members, for archives the writer would never produce. */
function tarOf(members: readonly (readonly [string, string | Buffer])[]): Readable {
  const pack = tarPack();
  for (const [name, data] of members) pack.entry({ name, mode: 0o644, mtime: new Date(0) }, data);
  pack.finalize();
  return Readable.from(pack);
}

const OVA = "<value><struct></struct></value>";

describe("round trip", () => {
  const big = sparseDisk(5 * MiB + 123, [0, 2, 5], 7);
  const small = sparseDisk(4096, [0], 3);
  const sizes = new Map([["Ref:10", big.byteLength], ["Ref:2", small.byteLength]]);

  for (const checksum of ["xxhash", "sha1", null] as const) {
    test(`sparse disks come back byte-identical (checksum ${checksum ?? "none"})`, async () => {
      const xva = writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:2", blocks: blocksOf(small) }, { ref: "Ref:10", blocks: blocksOf(big) }], checksum });
      const back = await readBack(xva, sizes);
      assert.equal(back.ovaXml, OVA);
      // String order of ids: Ref:10 before Ref:2.
      assert.deepEqual([...back.disks.keys()], ["Ref:10", "Ref:2"]);
      assert.ok(back.disks.get("Ref:10")!.image.equals(big));
      assert.ok(back.disks.get("Ref:2")!.image.equals(small));
      assert.deepEqual(back.disks.get("Ref:10")!.blocks, [
        { index: 0, offset: 0, checksum },
        { index: 2, offset: 2 * MiB, checksum },
        { index: 5, offset: 5 * MiB, checksum },
      ]);
    });
  }

  test("members: names, checksum contents, mode 0644, mtime 0, ustar, two zero blocks at the end", async () => {
    const bytes = await bytesOf(writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: blocksOf(small) }], checksum: "xxhash" }));
    assert.equal(bytes.byteLength % 512, 0);
    assert.ok(bytes.subarray(-1024).every((byte) => byte === 0));
    assert.equal(bytes.subarray(257, 263).toString("latin1"), "ustar\0");
    const listing = execFileSync("tar", ["--force-local", "-tvf", "-"], { input: bytes, encoding: "utf8" });
    assert.match(listing, /^-rw-r--r-- 0\/0 +\d+ 1970-01-01 00:00 ova.xml\n.* Ref:1\/00000000\n.* Ref:1\/00000000.xxhash\n$/);
    const sum = execFileSync("tar", ["--force-local", "-xOf", "-", "Ref:1/00000000.xxhash"], { input: bytes, encoding: "latin1" });
    assert.match(sum, /^[0-9A-F]{16}$/);
    assert.equal(sum, blockChecksum("xxhash", small));
    const sha1 = await bytesOf(writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: blocksOf(small) }], checksum: "sha1" }));
    const sha1Sum = execFileSync("tar", ["--force-local", "-xOf", "-", "Ref:1/00000000.checksum"], { input: sha1, encoding: "latin1" });
    assert.match(sha1Sum, /^[0-9a-f]{40}$/);
  });

  test("a metadata-only archive holds ova.xml alone", async () => {
    const back = await readBack(writeXva({ ovaXml: OVA, disks: [], checksum: "xxhash" }), new Map());
    assert.equal(back.ovaXml, OVA);
    assert.equal(back.disks.size, 0);
  });

  test("backpressure: a slow reader holds the writer to a few blocks ahead", async () => {
    let produced = 0;
    async function* endless(): AsyncGenerator<XvaBlock> {
      for (let index = 0; index < 10_000; index++, produced++) yield { index, data: Buffer.alloc(MiB, 1) };
    }
    const xva = writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: endless() }], checksum: "xxhash" });
    const reader = xva[Symbol.asyncIterator]();
    await reader.next();
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok(produced < 40, `${produced} blocks produced for one chunk read`);
    xva.destroy();
  });

  test("a reader may leave a disk's blocks unread and go on to the next disk", async () => {
    const xva = writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: blocksOf(big) }, { ref: "Ref:2", blocks: blocksOf(small) }], checksum: "xxhash" });
    const archive = await openXva(xva);
    const seen: string[] = [];
    for await (const disk of archive.disks(new Map([["Ref:1", big.byteLength], ["Ref:2", small.byteLength]]))) {
      for await (const block of disk.blocks) {
        seen.push(`${disk.ref}/${block.index}`);
        break;
      }
    }
    assert.deepEqual(seen, ["Ref:1/0", "Ref:2/0"]);
  });
});

describe("writer refuses bad blocks", () => {
  async function* list(...blocks: XvaBlock[]): AsyncGenerator<XvaBlock> {
    yield* blocks;
  }
  const cases: [string, () => AsyncGenerator<XvaBlock>, RegExp][] = [
    ["no first block", () => list({ index: 1, data: Buffer.alloc(MiB, 1) }), /first block \(index 0\) must be present/],
    ["indexes not increasing", () => list({ index: 0, data: Buffer.alloc(MiB, 1) }, { index: 0, data: Buffer.alloc(MiB, 1) }), /indexes must increase/],
    ["a short block before the last", () => list({ index: 0, data: Buffer.alloc(10, 1) }, { index: 1, data: Buffer.alloc(MiB, 1) }), /only the last block may be shorter/],
    ["a block over 1 MiB", () => list({ index: 0, data: Buffer.alloc(MiB + 1, 1) }), /expected 1 to 1048576/],
    ["no blocks at all", () => list(), /no blocks/],
  ];
  for (const [what, blocks, message] of cases) {
    test(what, async () => {
      await assert.rejects(bytesOf(writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: blocks() }], checksum: null })), (error: Error) => error instanceof XvaWriteError && message.test(error.message));
    });
  }
  test("a disk ref that is not Ref:<n>", () => {
    assert.throws(() => writeXva({ ovaXml: OVA, disks: [{ ref: "../x", blocks: list() }], checksum: null }), /Ref:<n>/);
  });
});

describe("GNU tar archives", () => {
  const disk = sparseDisk(3 * MiB + 5, [0, 3], 11);
  for (const format of ["v7", "ustar", "gnu"]) {
    test(`tar --format=${format} of files on disk reads back (directory entry and all)`, async () => {
      const dir = join(work, format);
      mkdirSync(join(dir, "Ref:4"), { recursive: true });
      writeFileSync(join(dir, "ova.xml"), OVA);
      for await (const block of blocksOf(disk)) {
        const name = join(dir, "Ref:4", String(block.index).padStart(8, "0"));
        writeFileSync(name, block.data);
        writeFileSync(`${name}.xxhash`, blockChecksum("xxhash", block.data));
      }
      const archive = join(dir, "disk.xva");
      // --sort=name: members in counter order, as an importer needs them (readdir order is arbitrary).
      execFileSync("tar", ["--force-local", "--sort=name", `--format=${format}`, "-C", dir, "-cf", archive, "ova.xml", "Ref:4"]);
      const back = await readBack(createReadStream(archive), new Map([["Ref:4", disk.byteLength]]));
      assert.ok(back.disks.get("Ref:4")!.image.equals(disk));
      assert.deepEqual(back.disks.get("Ref:4")!.blocks.map((block) => [block.index, block.checksum]), [[0, "xxhash"], [3, "xxhash"]]);
    });
  }
});

test("XXH64 agrees with xxhsum -H64", (t) => {
  if (spawnSync("xxhsum", ["--version"]).error !== undefined) {
    t.skip("xxhsum is not installed (apt-get install xxhash): XXH64 not checked against it");
    return;
  }
  for (const data of [Buffer.alloc(0), Buffer.from("abc"), sparseDisk(MiB, [0], 5), Buffer.alloc(MiB)]) {
    const reference = execFileSync("xxhsum", ["-H64"], { input: data, encoding: "utf8" }).split(/\s+/)[0]!;
    assert.equal(blockChecksum("xxhash", data), reference.toUpperCase());
  }
});

describe("reader refuses bad archives", () => {
  const block = Buffer.alloc(MiB, 2);
  const sizes = new Map([["Ref:1", 4 * MiB], ["Ref:2", 4 * MiB]]);
  const cases: [string, readonly (readonly [string, string | Buffer])[], RegExp][] = [
    ["ova.xml not first", [["Ref:1/00000000", block], ["ova.xml", OVA]], /first member must be ova.xml, not "Ref:1\/00000000"/],
    ["an empty archive", [], /first member must be ova.xml, not the end of the archive/],
    ["ova.xml twice", [["ova.xml", OVA], ["ova.xml", OVA]], /ova.xml appears twice/],
    ["a name with ..", [["ova.xml", OVA], ["Ref:1/../../etc/x", block]], /path with \.\./],
    ["an absolute name", [["ova.xml", OVA], ["/Ref:1/00000000", block]], /absolute path/],
    ["an unexpected member", [["ova.xml", OVA], ["notes.txt", "hi"]], /unexpected member "notes.txt"/],
    ["blocks out of order", [["ova.xml", OVA], ["Ref:1/00000002", block], ["Ref:1/00000001", block]], /Ref:1\/00000001: out of order \(after block 2\)/],
    ["a duplicate block", [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000000", block]], /Ref:1\/00000000: duplicate block/],
    ["a disk coming back", [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:2/00000000", block], ["Ref:1/00000001", block]], /disk Ref:1 appears again/],
    ["a disk with no declared size", [["ova.xml", OVA], ["Ref:9/00000000", block]], /disk Ref:9 has no declared size/],
    ["data past the declared size", [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000004", Buffer.from("x")]], /Ref:1\/00000004: data at bytes 4194304 to 4194305 is past the disk's declared size 4194304/],
    ["a member over 1 MiB", [["ova.xml", OVA], ["Ref:1/00000000", Buffer.alloc(MiB + 1)]], /more than a 1 MiB block/],
    ["a checksum with no block before it", [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000001.xxhash", blockChecksum("xxhash", block)]], /checksum member Ref:1\/00000001.xxhash does not follow its data member/],
  ];
  for (const [what, members, message] of cases) {
    test(what, async () => {
      await assert.rejects(readBack(tarOf(members), sizes), (error: Error) => error instanceof XvaReadError && message.test(error.message));
    });
  }

  for (const kind of ["xxhash", "sha1"] as XvaChecksumKind[]) {
    test(`a ${kind} mismatch names the data member`, async () => {
      const suffix = kind === "xxhash" ? ".xxhash" : ".checksum";
      const members = [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000000" + suffix, blockChecksum(kind, block)], ["Ref:1/00000003", Buffer.from("late")], ["Ref:1/00000003" + suffix, blockChecksum(kind, Buffer.from("LATE"))]] as const;
      await assert.rejects(readBack(tarOf(members), sizes), (error: Error) => error instanceof XvaChecksumError && error.member === "Ref:1/00000003" && error.message === `Ref:1/00000003: ${kind} checksum mismatch`);
    });
  }

  test("ova.xml over the size limit", async () => {
    await assert.rejects(openXva(tarOf([["ova.xml", OVA]]), { maxOvaXmlBytes: 10 }), /ova.xml is 32 bytes, more than 10/);
  });

  test("bytes that are not a tar", async () => {
    await assert.rejects(openXva(Readable.from([Buffer.alloc(512, 0x41)])), (error: Error) => error instanceof XvaReadError && /not a readable tar stream/.test(error.message));
  });
});

describe("reader leniencies", () => {
  test("zero-length keep-alive members place nothing; counter gaps are zero blocks", async () => {
    const block = Buffer.alloc(MiB, 9);
    const members = [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000001", ""], ["Ref:1/00000002", ""], ["Ref:1/00000004", Buffer.from("end")]] as const;
    const back = await readBack(tarOf(members), new Map([["Ref:1", 4 * MiB + 3]]));
    assert.deepEqual(back.disks.get("Ref:1")!.blocks, [{ index: 0, offset: 0, checksum: null }, { index: 4, offset: 4 * MiB, checksum: null }]);
  });

  test("checksum members in either case, with a trailing newline", async () => {
    const block = Buffer.from("data");
    const members = [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000000.xxhash", blockChecksum("xxhash", block).toLowerCase() + "\n"]] as const;
    const back = await readBack(tarOf(members), new Map([["Ref:1", 4]]));
    assert.deepEqual(back.disks.get("Ref:1")!.blocks, [{ index: 0, offset: 0, checksum: "xxhash" }]);
  });
});
