// Legacy packages (appliance 0.1) through openXva: ova.xml as the real parser and as the spec write it, chunks
// gzipped by node:zlib, gzip and pigz, both chunk spellings, a full 1e9-byte chunk, packages packed by
// packLegacyDirectory and by GNU tar, and the malformed packages an importer must refuse.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, describe, test } from "node:test";
import { gzipSync } from "node:zlib";
import { pack as tarPack } from "tar-stream";
import { XVA_BLOCK_SIZE } from "./format.ts";
import { LEGACY_CHUNK_BYTES, LegacyPackageError, isLegacyOvaXml, legacyChunkMember, packLegacyDirectory, parseLegacyOvaXml } from "./legacy.ts";
import { OvaXmlError } from "./ova-xml.ts";
import { openXva, XvaReadError, type XvaBlockRead } from "./reader.ts";

const MiB = XVA_BLOCK_SIZE;
const work = mkdtempSync(join(tmpdir(), "legacy-test-"));
after(() => rmSync(work, { recursive: true, force: true }));

/** The byte a test disk holds at `position` when that position carries data. */
const byteAt = (position: number, seed: number) => (position * 31 + seed) & 0xff || 1;

/** `length` bytes of disk from `start`: data inside the given ranges, zeros elsewhere. */
function content(start: number, length: number, ranges: readonly (readonly [number, number])[], seed: number): Buffer {
  const out = Buffer.alloc(length);
  for (const [from, to] of ranges) {
    for (let p = Math.max(from, start); p < Math.min(to, start + length); p++) out[p - start] = byteAt(p, seed);
  }
  return out;
}

type Gzip = "zlib" | "gzip" | "pigz";
const gzip = (data: Buffer, how: Gzip): Buffer => (how === "zlib" ? gzipSync(data) : execFileSync(how, ["-c", "-n", "-6"], { input: data, maxBuffer: 1 << 30 }));

/** A package directory: ova.xml and per disk directory its chunk files (already gzipped). */
function writePackage(name: string, ovaXml: string, disks: Record<string, Record<string, Buffer>>): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "ova.xml"), ovaXml);
  for (const [diskDir, files] of Object.entries(disks)) {
    mkdirSync(join(dir, diskDir), { recursive: true });
    for (const [file, data] of Object.entries(files)) writeFileSync(join(dir, diskDir, file), data);
  }
  return dir;
}

/** A tar stream of exactly these members, for packages the packer would never produce. */
function tarOf(members: readonly (readonly [string, string | Buffer])[]): Readable {
  const pack = tarPack();
  for (const [name, data] of members) pack.entry({ name, mode: 0o644, mtime: new Date(0) }, data);
  pack.finalize();
  return Readable.from(pack);
}

async function bytesOf(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

type Read = { kind: string; metadata: Awaited<ReturnType<typeof openXva>>["metadata"]; disks: Map<string, { image: Buffer; blocks: Omit<XvaBlockRead, "data">[] }> };

/** A small package read whole: disk images rebuilt from the blocks' offsets. */
async function readLegacy(source: Readable): Promise<Read> {
  const archive = await openXva(source);
  const sizes = new Map(archive.metadata.objects.filter((o) => o.class === "VDI").map((o) => [o.id, o.snapshot.virtual_size as number]));
  const disks: Read["disks"] = new Map();
  for await (const disk of archive.disks(sizes)) {
    const image = Buffer.alloc(sizes.get(disk.ref)!);
    const blocks: Omit<XvaBlockRead, "data">[] = [];
    for await (const { data, ...block } of disk.blocks) {
      assert.ok(data.byteLength > 0 && data.byteLength <= MiB);
      assert.ok(data.some((byte) => byte !== 0), "all-zero blocks are not yielded");
      data.copy(image, block.offset);
      blocks.push(block);
    }
    disks.set(disk.ref, { image, blocks });
  }
  return { kind: archive.kind, metadata: archive.metadata, disks };
}

/** As real parsers' writers have it: variety, hacks with is_hvm false, mode w, a prolog, whitespace. */
const realOva = (disks: readonly { name: string; size: number; source: string; variety?: string }[], vbds = `<vbd device="xvda" function="root" mode="w" vdi="vdi_xvda" />\n<vbd device="xvdb" function="" mode="rw" vdi="vdi_xvdb" />`) => `<?xml version="1.0" ?>
    <appliance version="0.1">
        <vm name="vm">
            <label>  Foo &amp; Bar </label>
            <shortdesc>Created by rPath rBuilder</shortdesc>
            <config mem_set="268435456" vcpus="2"/>
            <hacks is_hvm="false" kernel_boot_cmdline="root=/dev/xvda1 ro ">
            </hacks>
${vbds}
        </vm>
${disks.map((d) => `<vdi name="${d.name}" size="${d.size}" source="${d.source}" type="dir-gzipped-chunks"${d.variety === undefined ? "" : ` variety="${d.variety}"`} />`).join("\n")}
</appliance>
`;

/** As the spec shows it: mode ro, no variety, no hacks. */
const specOva = (size: number) => `<appliance version="0.1">
  <vm name="x">
    <label>spec</label>
    <shortdesc> a disk, read-only </shortdesc>
    <config mem_set="1073741824" vcpus="1"/>
    <vbd device="hda" function="root" mode="ro" vdi="vdi_sda"/>
  </vm>
  <vdi name="vdi_sda" size="${size}" source="file://sda" type="dir-gzipped-chunks"/>
</appliance>`;

describe("ova.xml of a legacy package", () => {
  test("is told from an XVA's", () => {
    assert.ok(isLegacyOvaXml(realOva([])));
    assert.ok(isLegacyOvaXml(`\uFEFF<!-- c --><appliance version="0.2"/>`));
    assert.ok(isLegacyOvaXml(`<?xml version="1.0"?>\n<!DOCTYPE appliance>\n<appliance version="0.1"></appliance>`));
    assert.ok(!isLegacyOvaXml("<value><struct></struct></value>"));
    assert.ok(!isLegacyOvaXml(`<?xml version="1.0"?><value><appliance/></value>`));
  });

  test("real-parser style becomes a PV VM, an SR, VDIs and VBDs", () => {
    const { metadata, disks } = parseLegacyOvaXml(realOva([{ name: "vdi_xvda", size: 5 * MiB, source: "file://xvda", variety: "system" }, { name: "vdi_xvdb", size: 7, source: "file://./data/xvdb/", variety: "Ephemeral" }]));
    assert.deepEqual(disks, [{ ref: "Ref:2", name: "vdi_xvda", size: 5 * MiB, dir: "xvda" }, { ref: "Ref:3", name: "vdi_xvdb", size: 7, dir: "data/xvdb" }]);
    const byId = new Map(metadata.objects.map((o) => [o.id, o]));
    assert.deepEqual(metadata.objects.map((o) => `${o.class} ${o.id}`), ["SR Ref:0", "VM Ref:1", "VDI Ref:2", "VDI Ref:3", "VBD Ref:4", "VBD Ref:5"]);
    assert.deepEqual(byId.get("Ref:0")!.snapshot, { name_label: "legacy package", name_description: "", content_type: "user", VDIs: ["Ref:2", "Ref:3"] });
    const vm = byId.get("Ref:1")!.snapshot;
    assert.equal(vm.name_label, "Foo & Bar");
    assert.equal(vm.name_description, "Created by rPath rBuilder");
    for (const field of ["memory_static_max", "memory_static_min", "memory_dynamic_max", "memory_dynamic_min", "memory_target"]) assert.equal(vm[field], 268435456, field);
    assert.equal(vm.VCPUs_max, 2);
    assert.equal(vm.VCPUs_at_startup, 2);
    assert.equal(vm.PV_bootloader, "pygrub");
    assert.equal(vm.PV_args, "root=/dev/xvda1 ro ");
    assert.equal(vm.HVM_boot_policy, "");
    assert.deepEqual(vm.VBDs, ["Ref:4", "Ref:5"]);
    assert.deepEqual(byId.get("Ref:2")!.snapshot, { name_label: "vdi_xvda", name_description: "", virtual_size: 5 * MiB, type: "system", SR: "Ref:0", read_only: false, sharable: false, VBDs: ["Ref:4"] });
    assert.equal(byId.get("Ref:3")!.snapshot.type, "ephemeral");
    assert.deepEqual(byId.get("Ref:4")!.snapshot, { device: "xvda", userdevice: "0", bootable: true, mode: "RW", type: "Disk", empty: false, VDI: "Ref:2", VM: "Ref:1" });
    assert.deepEqual(byId.get("Ref:5")!.snapshot, { device: "xvdb", userdevice: "1", bootable: false, mode: "RW", type: "Disk", empty: false, VDI: "Ref:3", VM: "Ref:1" });
  });

  test("spec style (mode ro, no variety, no hacks) becomes an HVM VM with a read-only user disk", () => {
    const { metadata } = parseLegacyOvaXml(specOva(10));
    const vm = metadata.objects.find((o) => o.class === "VM")!.snapshot;
    assert.equal(vm.HVM_boot_policy, "BIOS order");
    assert.deepEqual(vm.HVM_boot_params, { order: "cd" });
    assert.equal(vm.PV_bootloader, "");
    assert.equal(vm.name_description, "a disk, read-only");
    assert.equal(metadata.objects.find((o) => o.class === "VBD")!.snapshot.mode, "RO");
    assert.equal(metadata.objects.find((o) => o.class === "VDI")!.snapshot.type, "user");
  });

  test("mode r is read-only; every variety maps", () => {
    const xml = realOva(
      ["system", "user", "ephemeral", "suspend", "crashdump"].map((variety, i) => ({ name: `v${i}`, size: 1, source: `file://d${i}`, variety })),
      `<vbd device="xvda" function="root" mode="r" vdi="v0"/>`,
    );
    const { metadata } = parseLegacyOvaXml(xml);
    assert.deepEqual(metadata.objects.filter((o) => o.class === "VDI").map((o) => o.snapshot.type), ["system", "user", "ephemeral", "suspend", "crashdump"]);
    assert.equal(metadata.objects.find((o) => o.class === "VBD")!.snapshot.mode, "RO");
  });

  const refused: [string, string, RegExp][] = [
    ["another version", `<appliance version="0.2"><vm/></appliance>`, /version "0.2" is not 0.1/],
    ["no version", `<appliance><vm/></appliance>`, /<appliance> has no version/],
    ["no label", specOva(1).replace("<label>spec</label>", ""), /<label> of the <vm> is missing/],
    ["no shortdesc", specOva(1).replace(/<shortdesc>.*<\/shortdesc>/, ""), /<shortdesc> of the <vm> is missing/],
    ["two labels", specOva(1).replace("<label>spec</label>", "<label>a</label><label>b</label>"), /<label> of the <vm> appears more than once/],
    ["a size that is not a number", specOva(1).replace('size="1"', 'size="10G"'), /<vdi> size is not a whole number/],
    ["a negative size", specOva(1).replace('size="1"', 'size="-1"'), /<vdi> size is not a whole number/],
    ["a size past 2^53", specOva(1).replace('size="1"', 'size="99999999999999999999"'), /<vdi> size is too large/],
    ["no config", specOva(1).replace(/<config[^>]*\/>/, ""), /<config> of the <vm> is missing/],
    ["vcpus missing", specOva(1).replace(' vcpus="1"', ""), /<config> vcpus is missing/],
    ["a vbd to an unknown vdi", specOva(1).replace('vdi="vdi_sda"/>', 'vdi="nope"/>'), /vbd "hda" points to vdi "nope", which is not a <vdi> of the package/],
    ["an unknown mode", specOva(1).replace('mode="ro"', 'mode="x"'), /mode "x" is none of w, rw, r, ro/],
    ["an unknown variety", specOva(1).replace('type="dir-gzipped-chunks"', 'type="dir-gzipped-chunks" variety="odd"'), /unknown variety "odd"/],
    ["another disk format", specOva(1).replace('type="dir-gzipped-chunks"', 'type="vhd"'), /type "vhd" is not dir-gzipped-chunks/],
    ["a source that is not file://", specOva(1).replace("file://sda", "http://x/sda"), /source "http:\/\/x\/sda" is not a file:\/\/ URI/],
    ["an absolute source", specOva(1).replace("file://sda", "file:///etc"), /is absolute/],
    ["a source escaping with ..", specOva(1).replace("file://sda", "file://sda/../../etc"), /escapes the package with \.\./],
    ["a source naming no directory", specOva(1).replace("file://sda", "file://./"), /names no directory/],
    ["two vdis with one source", specOva(1).replace("</appliance>", '<vdi name="b" size="1" source="file://sda/" type="dir-gzipped-chunks"/></appliance>'), /another vdi has the same source/],
    ["a vdi name twice", specOva(1).replace("</appliance>", '<vdi name="vdi_sda" size="1" source="file://sdb" type="dir-gzipped-chunks"/></appliance>'), /vdi "vdi_sda" appears twice/],
    ["no vm", `<appliance version="0.1"></appliance>`, /<appliance> holds no <vm>/],
    ["two vms", specOva(1).replace("</appliance>", '<vm><label/><shortdesc/><config mem_set="1" vcpus="1"/></vm></appliance>'), /more than one <vm>/],
    ["is_hvm neither true nor false", realOva([]).replace('is_hvm="false"', 'is_hvm="maybe"').replace(/<vbd[^>]*\/>/g, ""), /is_hvm "maybe" is neither true nor false/],
    ["not XML", `<appliance version="0.1"><vm>`, /not well-formed XML/],
  ];
  for (const [what, xml, message] of refused) {
    test(`refused: ${what}`, () => {
      assert.throws(
        () => parseLegacyOvaXml(xml),
        (error: Error) => error instanceof OvaXmlError && error.message.startsWith("ova.xml (legacy package): ") && message.test(error.message),
      );
    });
  }

  test("chunk member names, both spellings", () => {
    assert.deepEqual(legacyChunkMember("xvda/chunk-000000012.gz"), { dir: "xvda", index: 12 });
    assert.deepEqual(legacyChunkMember("a/./b/chunk000000000.gz"), { dir: "a/b", index: 0 });
    assert.equal(legacyChunkMember("chunk-000000000.gz"), null);
    assert.equal(legacyChunkMember("xvda/chunk-000000000"), null);
    assert.equal(legacyChunkMember("xvda/notes.gz"), null);
  });
});

describe("reading packages", () => {
  // Two single-chunk disks (only a disk's last chunk may be short): data, a zero run, a short last block.
  const aSize = 5 * MiB + 123;
  const aRanges = [[0, 1000], [3 * MiB + 17, 4 * MiB + 5], [5 * MiB + 100, 5 * MiB + 123]] as const;
  const bSize = 2 * MiB;
  const bRanges = [[MiB, 2 * MiB]] as const;
  const a = content(0, aSize, aRanges, 3);
  const b = content(0, bSize, bRanges, 9);

  for (const how of ["zlib", "gzip", "pigz"] as const) {
    test(`packLegacyDirectory → openXva, chunks by ${how}, both spellings`, async () => {
      const dir = writePackage(`pack-${how}`, realOva([{ name: "vdi_xvda", size: aSize, source: "file://xvda", variety: "system" }, { name: "vdi_xvdb", size: bSize, source: "file://disks/xvdb", variety: "user" }]), {
        xvda: { "chunk-000000000.gz": gzip(a, how), "README": Buffer.from("not a chunk: left out") },
        "disks/xvdb": { "chunk000000000.gz": gzip(b, how) },
      });
      const read = await readLegacy(packLegacyDirectory(dir));
      assert.equal(read.kind, "legacy");
      assert.deepEqual([...read.disks.keys()], ["Ref:2", "Ref:3"]);
      assert.ok(read.disks.get("Ref:2")!.image.equals(a));
      assert.ok(read.disks.get("Ref:3")!.image.equals(b));
      assert.deepEqual(read.disks.get("Ref:2")!.blocks, [
        { index: 0, offset: 0, checksum: null },
        { index: 3, offset: 3 * MiB, checksum: null },
        { index: 4, offset: 4 * MiB, checksum: null },
        { index: 5, offset: 5 * MiB, checksum: null },
      ]);
      assert.deepEqual(read.disks.get("Ref:3")!.blocks, [{ index: 1, offset: MiB, checksum: null }]);
    });
  }

  test("the spec's style through openXva", async () => {
    const data = content(0, 3000, [[0, 3000]], 1);
    const read = await readLegacy(tarOf([["ova.xml", specOva(3000)], ["sda/chunk000000000.gz", gzip(data, "gzip")]]));
    assert.ok(read.disks.get("Ref:2")!.image.equals(data));
    assert.equal(read.metadata.objects.find((o) => o.class === "VBD")!.snapshot.mode, "RO");
  });

  test("a chunk of several gzip members (cat a.gz b.gz) gunzips whole", async () => {
    const data = content(0, 3000, [[0, 3000]], 1);
    const read = await readLegacy(tarOf([["ova.xml", specOva(3000)], ["sda/chunk-000000000.gz", Buffer.concat([gzip(data.subarray(0, 1000), "gzip"), gzip(data.subarray(1000), "zlib")])]]));
    assert.ok(read.disks.get("Ref:2")!.image.equals(data));
  });

  test("a disk that is all zeros yields no block, and a size-0 disk needs no chunk", async () => {
    const xml = realOva([{ name: "vdi_xvda", size: 3 * MiB, source: "file://xvda" }, { name: "vdi_xvdb", size: 0, source: "file://xvdb" }]);
    const read = await readLegacy(tarOf([["ova.xml", xml], ["xvda/chunk-000000000.gz", gzip(Buffer.alloc(3 * MiB), "zlib")]]));
    assert.equal(read.disks.size, 0);
  });

  test("the packer orders chunks numerically whatever their spelling, ova.xml first", async () => {
    const dir = writePackage("order", specOva(1), { sda: Object.fromEntries([0, 1, 2, 10, 11].map((i) => [`chunk${i % 2 ? "-" : ""}${String(i).padStart(9, "0")}.gz`, Buffer.from("x")])) });
    // 3 to 9 are missing: the packer says so before sending anything.
    await assert.rejects(bytesOf(packLegacyDirectory(dir)), (error: Error) => error instanceof LegacyPackageError && /chunk 3 is missing/.test(error.message));
    for (let i = 3; i < 10; i++) writeFileSync(join(dir, "sda", `chunk${String(i).padStart(9, "0")}.gz`), "x");
    const listing = execFileSync("tar", ["-tf", "-"], { input: await bytesOf(packLegacyDirectory(dir)), encoding: "utf8" }).trim().split("\n");
    assert.equal(listing[0], "ova.xml");
    assert.deepEqual(listing.slice(1).map((name) => legacyChunkMember(name)!.index), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert.equal(listing[2], "sda/chunk-000000001.gz");
  });

  test("the packer refuses a chunk number twice and a disk without chunks", async () => {
    const twice = writePackage("twice", specOva(1), { sda: { "chunk-000000000.gz": Buffer.from("x"), "chunk000000000.gz": Buffer.from("x") } });
    await assert.rejects(bytesOf(packLegacyDirectory(twice)), (error: Error) => error instanceof LegacyPackageError && /chunk 0 appears twice/.test(error.message));
    const empty = writePackage("empty", specOva(1), { sda: {} });
    await assert.rejects(bytesOf(packLegacyDirectory(empty)), (error: Error) => error instanceof LegacyPackageError && /no chunk files/.test(error.message));
    const bad = writePackage("bad", specOva(1).replace("file://sda", "file://../sda"), {});
    await assert.rejects(bytesOf(packLegacyDirectory(bad)), OvaXmlError);
  });

  test("the packer streams with backpressure: a slow reader holds it to a few MiB", async () => {
    const dir = writePackage("big", specOva(LEGACY_CHUNK_BYTES), { sda: {} });
    // Sparse: 512 MiB that take no disk space and read fast.
    writeFileSync(join(dir, "sda", "chunk-000000000.gz"), "");
    truncateSync(join(dir, "sda", "chunk-000000000.gz"), 512 * MiB);
    const before = process.memoryUsage().arrayBuffers;
    const stream = packLegacyDirectory(dir);
    const reader = stream[Symbol.asyncIterator]();
    await reader.next();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const grown = process.memoryUsage().arrayBuffers - before;
    stream.destroy();
    assert.ok(grown < 64 * MiB, `${grown} bytes buffered for one chunk read`);
  });
});

describe("a legacy package's ova.xml", () => {
  test("over 64 KiB is refused in words before it is parsed (it is parsed on the event loop)", async () => {
    const padded = specOva(MiB).replace("<shortdesc>", `<shortdesc>${"x".repeat(70 * 1024)}`);
    await assert.rejects(openXva(tarOf([["ova.xml", padded]])), (error: Error) => error instanceof XvaReadError && /legacy package's ova\.xml is \d+ bytes, more than 65536/.test(error.message));
  });
});

describe("reader backpressure", () => {
  test("a consumer that stops after one block holds gunzip to a few blocks ahead", async () => {
    // 128 MiB that compress to little: without backpressure it would all be gunzipped into memory at once.
    const pattern = Buffer.from(Array.from({ length: 251 }, (_, i) => i + 1));
    const chunk = gzipSync(Buffer.alloc(128 * MiB, pattern), { level: 1 });
    const archive = await openXva(tarOf([["ova.xml", specOva(128 * MiB)], ["sda/chunk-000000000.gz", chunk]]));
    const before = process.memoryUsage().arrayBuffers;
    for await (const disk of archive.disks(new Map())) {
      const blocks = disk.blocks[Symbol.asyncIterator]();
      assert.equal((await blocks.next()).value?.offset, 0);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const grown = process.memoryUsage().arrayBuffers - before;
      assert.ok(grown < 32 * MiB, `${grown} bytes held for one block read`);
      break;
    }
    archive.close();
  });
});

describe("a full 1e9-byte chunk, through GNU tar", () => {
  test("two chunks: offsets and bytes across the chunk boundary", { timeout: 60_000 }, async () => {
    const size = LEGACY_CHUNK_BYTES + 3 * MiB + 5;
    // Data at the start, across the chunk boundary, and in the short last chunk.
    const ranges = [[0, MiB + MiB / 2], [LEGACY_CHUNK_BYTES - MiB / 2, size]] as const;
    const dir = join(work, "gigabyte");
    mkdirSync(join(dir, "xvda"), { recursive: true });
    writeFileSync(join(dir, "ova.xml"), realOva([{ name: "vdi_xvda", size, source: "file://xvda", variety: "system" }], `<vbd device="xvda" function="root" mode="w" vdi="vdi_xvda"/>`));
    writeFileSync(join(dir, "head"), content(0, MiB + MiB / 2, ranges, 5));
    writeFileSync(join(dir, "tail"), content(LEGACY_CHUNK_BYTES - MiB / 2, MiB / 2, ranges, 5));
    // pigz -1 of mostly zeros: about a second for the gigabyte.
    const zeros = LEGACY_CHUNK_BYTES - 2 * MiB;
    execFileSync("bash", ["-c", `set -o pipefail; { cat head; head -c ${zeros} /dev/zero; cat tail; } | pigz -1 > xvda/chunk-000000000.gz && rm head tail`], { cwd: dir });
    writeFileSync(join(dir, "xvda", "chunk-000000001.gz"), gzip(content(LEGACY_CHUNK_BYTES, size - LEGACY_CHUNK_BYTES, ranges, 5), "gzip"));

    // `.`: members named ./ova.xml, ./xvda/..., with directory entries; --sort=name puts ova.xml first.
    const tar = spawn("tar", ["--sort=name", "-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
    const archive = await openXva(tar.stdout);
    assert.equal(archive.kind, "legacy");
    const seen: { index: number; offset: number }[] = [];
    for await (const disk of archive.disks(new Map())) {
      assert.equal(disk.ref, "Ref:2");
      for await (const block of disk.blocks) {
        seen.push({ index: block.index, offset: block.offset });
        assert.equal(block.checksum, null);
        assert.ok(block.data.equals(content(block.offset, block.data.byteLength, ranges, 5)), `block ${block.index}`);
        assert.equal(block.data.byteLength, Math.min(MiB, size - block.offset));
      }
    }
    // 1e9 is 953 MiB and 707072 bytes: block 953 holds the end of chunk 0 and the start of chunk 1.
    assert.deepEqual(seen.map((block) => block.index), [0, 1, 953, 954, 955, 956]);
    assert.ok(seen.every((block) => block.offset === block.index * MiB));
  });
});

describe("refused packages", () => {
  const data = content(0, 3000, [[0, 3000]], 1);
  const ok = gzip(data, "zlib");
  const ova = specOva(3000);
  const cases: [string, readonly (readonly [string, string | Buffer])[], RegExp][] = [
    ["chunks out of order", [["ova.xml", specOva(LEGACY_CHUNK_BYTES + 3000)], ["sda/chunk-000000001.gz", ok], ["sda/chunk-000000000.gz", ok]], /sda\/chunk-000000001.gz: chunk 0 of vdi "vdi_sda" \(Ref:2, file:\/\/sda\) is missing \(or out of order\)/],
    ["a missing chunk", [["ova.xml", specOva(2 * LEGACY_CHUNK_BYTES)], ["sda/chunk-000000000.gz", ok], ["sda/chunk-000000002.gz", ok]], /chunk 1 of vdi "vdi_sda" .* is missing/],
    ["a chunk twice, in both spellings", [["ova.xml", ova], ["sda/chunk-000000000.gz", ok], ["sda/chunk000000000.gz", ok]], /sda\/chunk000000000.gz: chunk 0 appears twice/],
    ["a short chunk before the last", [["ova.xml", specOva(LEGACY_CHUNK_BYTES + 3000)], ["sda/chunk-000000000.gz", ok], ["sda/chunk-000000001.gz", ok]], /sda\/chunk-000000000.gz \(3000 bytes gunzipped\): only a disk's last chunk may hold less than 1000000000 bytes/],
    ["a chunk that is not gzip", [["ova.xml", ova], ["sda/chunk-000000000.gz", data]], /sda\/chunk-000000000.gz: not a valid gzip stream/],
    ["a truncated gzip stream", [["ova.xml", ova], ["sda/chunk-000000000.gz", ok.subarray(0, ok.byteLength - 9)]], /sda\/chunk-000000000.gz: not a valid gzip stream/],
    ["data past the declared size", [["ova.xml", specOva(2999)], ["sda/chunk-000000000.gz", ok]], /sda\/chunk-000000000.gz: data at bytes 0 to 3000 is past the disk's declared size 2999/],
    ["less data than the declared size", [["ova.xml", specOva(3001)], ["sda/chunk-000000000.gz", ok]], /vdi "vdi_sda" .* holds 3000 bytes of its declared 3001 .*truncated|archive truncated/],
    ["a disk with no chunk at all", [["ova.xml", ova]], /vdi "vdi_sda" .*: none of its chunks came/],
    ["a chunk of a directory no vdi names", [["ova.xml", ova], ["sdb/chunk-000000000.gz", ok]], /sdb\/chunk-000000000.gz: no vdi of ova.xml has source file:\/\/sdb/],
    ["a member that is no chunk", [["ova.xml", ova], ["sda/notes.txt", "x"]], /unexpected member "sda\/notes.txt"/],
    ["a path with ..", [["ova.xml", ova], ["sda/../../x/chunk-000000000.gz", ok]], /path with \.\./],
  ];
  for (const [what, members, message] of cases) {
    test(what, async () => {
      await assert.rejects(readLegacy(tarOf(members)), (error: Error) => error instanceof XvaReadError && message.test(error.message));
    });
  }

  test("a disk whose chunks stop before its size, then another disk", async () => {
    const xml = realOva([{ name: "vdi_xvda", size: 3001, source: "file://xvda" }, { name: "vdi_xvdb", size: 3000, source: "file://xvdb" }]);
    await assert.rejects(readLegacy(tarOf([["ova.xml", xml], ["xvda/chunk-000000000.gz", ok], ["xvdb/chunk-000000000.gz", ok]])), /vdi "vdi_xvda" \(Ref:2, file:\/\/xvda\) holds 3000 bytes of its declared 3001 \(chunks 0 to 0 came\): truncated/);
  });

  test("the stream cut inside a chunk is a truncated archive", async () => {
    // Random bytes do not compress: the cut falls well inside the member.
    const noisy = gzip(randomBytes(4 * MiB), "zlib");
    const whole = await bytesOf(tarOf([["ova.xml", specOva(4 * MiB)], ["sda/chunk-000000000.gz", noisy]]));
    await assert.rejects(readLegacy(Readable.from([whole.subarray(0, 512 * 4 + 20_000)])), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended inside member sda\/chunk-000000000.gz$/.test(error.message));
  });

  test("the stream cut after the last chunk, before the end-of-archive blocks", async () => {
    const whole = await bytesOf(tarOf([["ova.xml", ova], ["sda/chunk-000000000.gz", ok]]));
    await assert.rejects(readLegacy(Readable.from([whole.subarray(0, whole.byteLength - 1024)])), (error: Error) => error instanceof XvaReadError && /^archive truncated: the stream ended after member sda\/chunk-000000000.gz, without the tar end-of-archive blocks$/.test(error.message));
  });

  test("a bad ova.xml fails openXva", async () => {
    await assert.rejects(openXva(tarOf([["ova.xml", specOva(1).replace('version="0.1"', 'version="1.0"')]])), (error: Error) => error instanceof OvaXmlError && /version "1.0" is not 0.1/.test(error.message));
    await assert.rejects(openXva(tarOf([["ova.xml", specOva(1).replace("file://sda", "file://../sda")]])), (error: Error) => error instanceof OvaXmlError && /escapes the package with \.\./.test(error.message));
  });
});
