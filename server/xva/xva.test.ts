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
import { formatOvaXml, parseOvaXml } from "./ova-xml.ts";
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

/** A ustar header of a directory whose size field says `size`, as a careless writer may leave it. */
function memberHeader(name: string, size: number, typeflag: string): Buffer {
  const header = Buffer.alloc(512);
  const field = (offset: number, length: number, value: string) => header.write(value, offset, length, "latin1");
  field(0, 100, name);
  field(100, 8, "0000755\0");
  field(108, 8, "0000000\0");
  field(116, 8, "0000000\0");
  field(124, 12, `${size.toString(8).padStart(11, "0")}\0`);
  field(136, 12, "00000000000\0");
  field(148, 8, "        ");
  field(156, 1, typeflag);
  field(257, 8, "ustar\u000000");
  let sum = 0;
  for (const byte of header) sum += byte;
  field(148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return header;
}

/** `promise`, or a failure once `ms` have passed: a hang fails the test rather than holding it. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** The smallest ova.xml parseOvaXml accepts: the reader parses it for the importer. */
const OVA = formatOvaXml({ version: { hostname: "", date: "", product_version: "", product_brand: "", build_number: "", xapi_major: 1, xapi_minor: 20, export_vsn: 2 }, objects: [] });

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

  test("a block's checksum is of its data as given, though the consumer reuses the buffer once it has read it", async () => {
    // An export lends each block's buffer and takes it back once sent: scribbling on every chunk read stands for the next read into it.
    const lent = async function* () {
      for await (const block of blocksOf(big)) yield { index: block.index, data: Buffer.from(block.data) };
    };
    const taken: Buffer[] = [];
    for await (const chunk of writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:10", blocks: lent() }], checksum: "xxhash" })) {
      taken.push(Buffer.from(chunk as Buffer));
      (chunk as Buffer).fill(0x5a);
    }
    const back = await readBack(Readable.from([Buffer.concat(taken)]), new Map([["Ref:10", big.byteLength]]));
    assert.ok(back.disks.get("Ref:10")!.image.equals(big));
  });

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
    ["a disk coming back", [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000003", block], ["Ref:2/00000000", block], ["Ref:1/00000004", block]], /disk Ref:1 appears again/],
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
    await assert.rejects(openXva(tarOf([["ova.xml", OVA]]), { maxOvaXmlBytes: 10 }), /ova.xml is \d+ bytes, more than 10/);
  });

  test("a directory entry declaring a size: read as GNU tar reads it (no data), never waited on", async () => {
    const header = memberHeader("ova-dir/", 1024, "5");
    const rest = await bytesOf(tarOf([["ova.xml", OVA], ["Ref:1/00000000", block]]));
    // No data follows (the size is a careless writer's): the archive reads on.
    const oneBlock = new Map([["Ref:1", MiB]]);
    const read = await within(5000, readBack(Readable.from([header, rest]), oneBlock));
    assert.deepEqual(read.disks.get("Ref:1")!.image.subarray(0, MiB), block);
    // Data follows: GNU tar would read it as the next header, and so do we; refused in words, not a hang.
    await assert.rejects(within(5000, readBack(Readable.from([header, Buffer.alloc(1024, 0x78), rest]), oneBlock)), (error: Error) => error instanceof XvaReadError);
  });

  test("an unknown type flag is a regular file, as GNU tar extracts it; a link or a device is refused in words", async () => {
    const padded = (data: Buffer) => Buffer.concat([data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
    const ova = Buffer.from(OVA);
    const rest = await bytesOf(tarOf([["Ref:1/00000000", block]]));
    const oneBlock = new Map([["Ref:1", MiB]]);
    const read = await within(5000, readBack(Readable.from([memberHeader("ova.xml", ova.length, "Z"), padded(ova), rest]), oneBlock));
    assert.deepEqual(read.disks.get("Ref:1")!.image.subarray(0, MiB), block);
    for (const [typeflag, what] of [["2", "symlink"], ["3", "character-device"], ["6", "fifo"]] as const) {
      const member = Buffer.concat([memberHeader("Ref:1/00000000", 512, typeflag), Buffer.alloc(512, 0x78)]);
      const cut = await bytesOf(tarOf([["ova.xml", OVA]]));
      // ova.xml, then the odd member where the first block would be (the tar's end blocks cut off first).
      const archive = Buffer.concat([cut.subarray(0, 512 + Math.ceil(ova.length / 512) * 512), member, Buffer.alloc(1024)]);
      await assert.rejects(within(5000, readBack(Readable.from([archive]), oneBlock)), (error: Error) => error instanceof XvaReadError && error.message.includes(`a ${what}, not a file`));
    }
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

describe("metadata", () => {
  test("an XVA's ova.xml comes parsed, kind xva", async () => {
    const ova = formatOvaXml({ version: { hostname: "h", date: "", product_version: "", product_brand: "", build_number: "", xapi_major: 1, xapi_minor: 20, export_vsn: 2 }, objects: [{ class: "VM", id: "Ref:1", snapshot: { name_label: "vm" } }] });
    const archive = await openXva(writeXva({ ovaXml: ova, disks: [], checksum: null }));
    assert.equal(archive.kind, "xva");
    assert.equal(archive.ovaXml, ova);
    assert.deepEqual(archive.metadata, await parseOvaXml(ova));
    archive.close();
  });

  test("an ova.xml that is not XML-RPC is refused at open", async () => {
    await assert.rejects(openXva(tarOf([["ova.xml", "<value><struct></struct></value>"]])), /ova.xml: /);
  });
});

describe("force", () => {
  const block = Buffer.alloc(MiB, 2);
  const members = [["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:1/00000000.xxhash", "0000000000000000"], ["Ref:1/00000001", block], ["Ref:1/00000001.xxhash", blockChecksum("xxhash", block)]] as const;

  test("a mismatch is yielded flagged and reading goes on", async () => {
    const archive = await openXva(tarOf(members), { force: true });
    const blocks: Omit<XvaBlockRead, "data">[] = [];
    for await (const disk of archive.disks(new Map([["Ref:1", 2 * MiB]]))) for await (const { data: _data, ...rest } of disk.blocks) blocks.push(rest);
    assert.deepEqual(blocks, [{ index: 0, offset: 0, checksum: "xxhash", checksumMismatch: true }, { index: 1, offset: MiB, checksum: "xxhash" }]);
  });

  test("without it the mismatch fails the read", async () => {
    await assert.rejects(readBack(tarOf(members), new Map([["Ref:1", 2 * MiB]])), XvaChecksumError);
  });

  test("options are validated", async () => {
    await assert.rejects(openXva(tarOf(members), { force: "yes" as unknown as boolean }));
  });
});

describe("a last block padded past the declared size (Xen Orchestra's writer)", () => {
  const size = 2 * MiB + 3;
  const last = Buffer.alloc(MiB);
  last.write("end");
  const first = Buffer.alloc(MiB, 5);
  // XO checksums the padded block.
  const padded = [["ova.xml", OVA], ["Ref:1/00000000", first], ["Ref:1/00000000.xxhash", blockChecksum("xxhash", first)], ["Ref:1/00000002", last], ["Ref:1/00000002.xxhash", blockChecksum("xxhash", last)]] as const;

  test("zero padding is trimmed, the checksum checked over the padded member", async () => {
    const back = await readBack(tarOf(padded), new Map([["Ref:1", size]]));
    const image = back.disks.get("Ref:1")!.image;
    assert.equal(image.byteLength, size);
    assert.equal(image.subarray(2 * MiB).toString(), "end");
    assert.ok(image.subarray(0, MiB).equals(first));
    assert.deepEqual(back.disks.get("Ref:1")!.blocks, [{ index: 0, offset: 0, checksum: "xxhash" }, { index: 2, offset: 2 * MiB, checksum: "xxhash" }]);
  });

  test("the data yielded is exactly the declared size", async () => {
    const archive = await openXva(tarOf(padded));
    const lengths: number[] = [];
    for await (const disk of archive.disks(new Map([["Ref:1", size]]))) for await (const block of disk.blocks) lengths.push(block.data.byteLength);
    assert.deepEqual(lengths, [MiB, 3]);
  });

  test("a disk smaller than one block, padded", async () => {
    const only = Buffer.alloc(MiB);
    only.write("tiny");
    const back = await readBack(tarOf([["ova.xml", OVA], ["Ref:1/00000000", only]]), new Map([["Ref:1", 4]]));
    assert.equal(back.disks.get("Ref:1")!.image.toString(), "tiny");
  });

  test("non-zero bytes past the end stay an error", async () => {
    const dirty = Buffer.alloc(MiB);
    dirty[MiB - 1] = 1;
    await assert.rejects(readBack(tarOf([["ova.xml", OVA], ["Ref:1/00000000", first], ["Ref:1/00000002", dirty]]), new Map([["Ref:1", size]])), (error: Error) => error instanceof XvaReadError && /past the disk's declared size .* not zero padding/.test(error.message));
  });

  test("a block starting past the end is an error even when zero", async () => {
    await assert.rejects(readBack(tarOf([["ova.xml", OVA], ["Ref:1/00000000", first], ["Ref:1/00000003", Buffer.alloc(MiB)]]), new Map([["Ref:1", size]])), /past the disk's declared size/);
  });
});

describe("truncation", () => {
  const disk = sparseDisk(3 * MiB + 5, [0, 1, 3], 13);
  const sizes = new Map([["Ref:1", disk.byteLength]]);
  let whole: Buffer;
  /** Byte offsets in `whole` where each member's header starts, and where the end-of-archive blocks do. */
  const boundaries: number[] = [];

  test("setup: an archive and its member boundaries", async () => {
    whole = await bytesOf(writeXva({ ovaXml: OVA, disks: [{ ref: "Ref:1", blocks: blocksOf(disk) }], checksum: "xxhash" }));
    for (let at = 0; at < whole.byteLength; ) {
      boundaries.push(at);
      const header = whole.subarray(at, at + 512);
      if (header.every((byte) => byte === 0)) break;
      const size = parseInt(header.subarray(124, 136).toString("latin1").replace(/\0.*$/, "").trim(), 8);
      at += 512 + Math.ceil(size / 512) * 512;
    }
    // ova.xml, 3 data + 3 checksum members, then the end blocks.
    assert.equal(boundaries.length, 8);
  });

  /** The archive cut at `length` bytes, ended (not failed) as an HTTP body is when the client hangs up. */
  const cut = (length: number) => Readable.from([whole.subarray(0, length)]);

  test("the whole archive reads back", async () => {
    const back = await readBack(cut(whole.byteLength), sizes);
    assert.ok(back.disks.get("Ref:1")!.image.equals(disk));
  });

  test("cut at a member boundary before the disk's last block", async () => {
    // After block 1's checksum, before block 3.
    await assert.rejects(readBack(cut(boundaries[5]!), sizes), (error: Error) => error instanceof XvaReadError && /^archive truncated: disk Ref:1 stops at byte 2097152 of its 3145733/.test(error.message));
  });

  test("cut inside a data member", async () => {
    await assert.rejects(readBack(cut(boundaries[3]! + 512 + 1000), sizes), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended inside member Ref:1\/00000001$/.test(error.message));
  });

  test("cut inside a header", async () => {
    await assert.rejects(readBack(cut(boundaries[5]! + 100), sizes), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended inside the tar header after member Ref:1\/00000001.xxhash/.test(error.message));
  });

  test("cut after the last member, before the end-of-archive blocks", async () => {
    await assert.rejects(readBack(cut(boundaries[7]!), sizes), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended after member Ref:1\/00000003.xxhash, without the tar end-of-archive blocks/.test(error.message));
  });

  test("cut after ova.xml", async () => {
    await assert.rejects(readBack(cut(boundaries[1]!), sizes), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended after member ova.xml/.test(error.message));
  });

  test("one end-of-archive block is enough", async () => {
    const back = await readBack(cut(boundaries[7]! + 512), sizes);
    assert.ok(back.disks.get("Ref:1")!.image.equals(disk));
  });

  test("a disk whose last block is missing before the next disk starts", async () => {
    const block = Buffer.alloc(MiB, 1);
    await assert.rejects(readBack(tarOf([["ova.xml", OVA], ["Ref:1/00000000", block], ["Ref:2/00000000", block]]), new Map([["Ref:1", 2 * MiB], ["Ref:2", MiB]])), /disk Ref:1 stops at byte 1048576 of its 2097152 .*: truncated/);
  });
});
