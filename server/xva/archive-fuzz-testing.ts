// Mutated archives for the fuzz targets of the XVA reader (xva.fuzz.ts) and of /import (import.fuzz.ts). Real
// archives are the seeds: one from our writer as an export makes it (testXva: a VM with a disk, a CD, a VIF),
// one from Xen Orchestra's `@xen-orchestra/xva` writer (blocks padded to 1 MiB, its own ova.xml), and a legacy
// package (appliance 0.1, a gzipped chunk). A mutation is a description fast-check generates and shrinks, applied
// to a seed: tar-level edits (header fields with the checksum made right or wrong, GNU long names, PAX records,
// links, devices, directories with data, members dropped, repeated, swapped, renamed), edits of ova.xml's
// objects and text, byte-level edits of the tar, then gzip or zstd (one or two members/frames) and edits of the
// compressed bytes. Positions and member indexes are taken modulo what the seed has, so any value applies.
import { Readable } from "node:stream";
import { gzipSync, zstdCompressSync } from "node:zlib";
import fc from "fast-check";
import { importVm } from "@xen-orchestra/xva/importVm.mjs";
import { pack as tarPack } from "tar-stream";
import type { Xapi } from "xen-api";
import { xenString, xenValue } from "../fuzz-testing.ts";
import { collect, MiB, patternBlock, testXva } from "../toolstack/transfer/testing.ts";
import type { XenRecord, XenValue } from "../xenapi/values.ts";
import { encodeXmlRpcValue, parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

type TarMember = { header: Buffer; data: Buffer };
export type SeedArchive = { name: string; members: TarMember[] };

const BLOCK = 512;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * The members of a tar as our seeds' writers make them (octal sizes, no PAX), up to the end-of-archive blocks.
 * The writers' random uuids are numbered instead (same length, so sizes hold): the same seed, the same bytes.
 */
function tarMembers(bytes: Buffer): TarMember[] {
  let uuids = 0;
  const numbered = (data: Buffer) => Buffer.from(data.toString("latin1").replace(UUID, () => `00000000-0000-4000-8000-${String(++uuids).padStart(12, "0")}`), "latin1");
  const members: TarMember[] = [];
  for (let at = 0; at + BLOCK <= bytes.length; ) {
    const header = bytes.subarray(at, at + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    const size = parseInt(header.toString("latin1", 124, 136).replace(/\0.*$/s, "").trim(), 8);
    const data = bytes.subarray(at + BLOCK, at + BLOCK + size);
    members.push({ header: Buffer.from(header), data: members.length === 0 ? numbered(data) : Buffer.from(data) });
    at += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
  }
  return members;
}

// ---- seeds ----

/** Our writer's archive, as /export writes it: a VM with a 2 MiB + 4097 byte disk (a counter gap, a short last block), a CD and a VIF. */
export async function hangarSeed(checksum: "xxhash" | "sha1"): Promise<SeedArchive> {
  const disk = { size: 2 * MiB + 4097, blocks: new Map([[0, patternBlock(1)], [2, patternBlock(2).subarray(0, 4097)]]) };
  return { name: `hangar-${checksum}`, members: tarMembers(await collect(testXva({ name: "fuzz", disks: [disk], checksum, version: { hostname: "fuzz", date: "20260101T00:00:00Z" } }))) };
}

/** Xen Orchestra's writer (what its VM import sends): its PUT caught by a stand-in for its Xapi. */
export async function xenOrchestraSeed(): Promise<SeedArchive> {
  const size = 2 * MiB + 3;
  const raw = Buffer.alloc(size);
  patternBlock(3).copy(raw, 0);
  patternBlock(4).copy(raw, 2 * MiB, 0, 3);
  let archive: Buffer | undefined;
  const xapi = {
    task_create: async () => "OpaqueRef:00000000-0000-4000-8000-00000000000a",
    putResource: async (body: Readable) => {
      archive = await collect(body);
      return "OpaqueRef:00000000-0000-4000-8000-00000000000b";
    },
  } as unknown as Xapi;
  await importVm(
    {
      name_label: "from XO",
      memory: 1024 * MiB,
      nCpus: 1,
      firmware: "bios",
      vdis: [{ name_label: "xo disk", name_description: "", virtual_size: size }],
      vhds: [{ rawContent: async () => Readable.from([raw], { objectMode: false }), footer: { currentSize: size } }],
      networks: [{ name_label: "eth0", macAddress: "aa:bb:cc:00:00:01" }],
    },
    xapi,
    { $ref: "OpaqueRef:00000000-0000-4000-8000-00000000000c", uuid: "00000000-0000-4000-8000-00000000000c", name_label: "SR", content_type: "user" },
    { $ref: "OpaqueRef:00000000-0000-4000-8000-00000000000d", name_label: "Pool-wide network associated with eth0", bridge: "xenbr0" },
  );
  return { name: "xen-orchestra", members: tarMembers(archive!) };
}

/** A legacy package (appliance 0.1): ova.xml, then one disk of a gzipped chunk. */
export async function legacySeed(): Promise<SeedArchive> {
  const size = 3 * 65536 + 5;
  const disk = Buffer.alloc(size);
  patternBlock(5, 65536).copy(disk, 65536);
  const ovaXml = `<?xml version="1.0" ?>
<appliance version="0.1">
  <vm name="vm">
    <label>legacy</label>
    <shortdesc>fuzz</shortdesc>
    <config mem_set="536870912" vcpus="1"/>
    <vbd device="xvda" function="root" mode="w" vdi="vdi_xvda"/>
  </vm>
  <vdi name="vdi_xvda" size="${size}" source="file://xvda" type="dir-gzipped-chunks" variety="system"/>
</appliance>
`;
  const pack = tarPack();
  pack.entry({ name: "ova.xml", mode: 0o644, mtime: new Date(0) }, ovaXml);
  pack.entry({ name: "xvda/chunk-000000000.gz", mode: 0o644, mtime: new Date(0) }, gzipSync(disk));
  pack.finalize();
  return { name: "legacy", members: tarMembers(await collect(pack as AsyncIterable<Uint8Array>)) };
}

// ---- mutations ----

/** Where the fields of a ustar header are: [offset, length]. */
const FIELDS = {
  name: [0, 100],
  mode: [100, 8],
  uid: [108, 8],
  gid: [116, 8],
  size: [124, 12],
  mtime: [136, 12],
  checksum: [148, 8],
  type: [156, 1],
  linkname: [157, 100],
  magic: [257, 6],
  version: [263, 2],
  devmajor: [329, 8],
  prefix: [345, 155],
} as const;
type Field = keyof typeof FIELDS;

const octal = (n: number, digits: number) => `${n.toString(8).padStart(digits, "0")}\0`;

/** Base-256 (GNU) encoding of a size field: 0x80 then big-endian; 0xff for negative. */
function base256(n: bigint): string {
  const bytes = Buffer.alloc(12, n < 0n ? 0xff : 0);
  let rest = n < 0n ? -n - 1n : n;
  for (let i = 11; i > 0 && rest > 0n; i--, rest >>= 8n) bytes[i] = Number(rest & 0xffn) ^ (n < 0n ? 0xff : 0);
  bytes[0] = n < 0n ? 0xff : 0x80;
  return bytes.toString("latin1");
}

const SIZES = [0, 1, 511, 512, 513, 16, 40, 1024 * 1024 - 1, 1024 * 1024, 1024 * 1024 + 1, 16 * 1024 * 1024, 16 * 1024 * 1024 + 1, 2 ** 31, 8 ** 11 - 1];

const NAMES = [
  "ova.xml",
  "./ova.xml",
  "ova.xml/",
  "/ova.xml",
  "../ova.xml",
  "Ref:1/00000000",
  "Ref:999/00000001",
  "Ref:1/99999999",
  "Ref:1/-0000001",
  "Ref:1/00000000.checksum",
  "Ref:1/00000000.xxhash",
  "./Ref:1/./00000000",
  "Ref:1//00000000",
  "xvda/chunk-000000001.gz",
  "xvda/chunk1.gz",
  "xvda/../xvda/chunk-000000000.gz",
  "a".repeat(100),
  "ova.xml\0trailing",
  "",
];

/** A value for a header field: numbers written as tar writes them (or not), names, type flags, garbage. */
const fieldValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...SIZES).map((n) => octal(n, 11)),
  fc.oneof(fc.constantFrom(...SIZES).map(BigInt), fc.bigInt({ min: -(2n ** 40n), max: 2n ** 80n })).map(base256),
  fc.constantFrom(...NAMES),
  fc.constantFrom("0", "\0", "1", "2", "3", "4", "5", "6", "7", "L", "K", "x", "g", "S", "V", "M", "D", "A", " "),
  fc.constantFrom("ustar\0", "ustar ", "\0\0\0\0\0\0", "00", " \0", "        ", "zzzzzzzzzzz", "-1", "1e10", "00000000017 "),
  fc.string({ unit: "binary-ascii", maxLength: 12 }),
);

const PAX_KEYS = ["path", "size", "linkpath", "mtime", "uid", "uname", "GNU.sparse.size", "GNU.sparse.map", "SCHILY.xattr.user.x", "hdrcharset", ""];

/** A PAX record, its length field right (the length counts its own digits) or off. */
const paxRecord = fc
  .record({ key: fc.constantFrom(...PAX_KEYS), value: fc.oneof(fc.constantFrom(...NAMES), fc.constantFrom(...SIZES).map(String), fc.constantFrom("-1", "1e9", "", "99999999999999999999", "\n")), lengthError: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, fc.integer({ min: -30, max: 1000 })) })
  .map(({ key, value, lengthError }) => {
    const body = ` ${key}=${value}\n`;
    let length = body.length + 1;
    while (String(length).length + body.length !== length) length = String(length).length + body.length;
    return `${length + lengthError}${body}`;
  });

/** A member a writer of ours never makes, put before an existing one. */
const specialMember = fc.oneof(
  fc.record({ type: fc.constant("L"), text: fc.oneof(fc.constantFrom(...NAMES), fc.nat({ max: 300 }).map((n) => `Ref:1/${"x".repeat(n)}`)) }),
  fc.record({ type: fc.constant("K"), text: fc.constantFrom(...NAMES) }),
  fc.record({ type: fc.constantFrom("x", "g"), text: fc.array(paxRecord, { minLength: 1, maxLength: 3 }).map((records) => records.join("")) }),
  fc.record({ type: fc.constantFrom("5", "1", "2", "3", "4", "6", "7", "0", "S", "V"), text: fc.oneof(fc.constant(""), fc.string({ unit: "binary-ascii", maxLength: 1500 })) }),
);

/** Names of the fields of ova.xml's records that the reader and the importer look at (and others). */
const RECORD_FIELDS = ["VBDs", "VIFs", "VDI", "SR", "VM", "network", "virtual_size", "type", "empty", "content_type", "is_a_snapshot", "is_control_domain", "name_label", "uuid", "MAC", "device", "userdevice", "mode", "bootable", "other_config", "memory_static_max", "VCPUs_max", "VCPUs_at_startup", "power_state", "HVM_boot_params", "sharable", "read_only"];
const VERSION_FIELDS = ["xapi_major", "xapi_minor", "export_vsn", "hostname", "date", "product_version", "build_number"];

/** A reference list of `count` ids: many devices on one VM, dangling or repeated ids. */
const refList = fc.record({ count: fc.nat({ max: 5000 }), first: fc.nat({ max: 20 }) }).map(({ count, first }) => Array.from({ length: count }, (_, n) => `Ref:${first + (n % 25)}`));

const ovaEdit = fc.oneof(
  fc.record({ kind: fc.constant("set" as const), object: fc.nat(), field: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...RECORD_FIELDS) }, xenString), value: fc.oneof(xenValue, refList) }),
  fc.record({ kind: fc.constant("top" as const), object: fc.nat(), field: fc.constantFrom("class", "id", "snapshot"), value: fc.oneof(fc.constantFrom("VM", "VBD", "VDI", "SR", "VIF", "network", "Ref:0", "Ref:1"), xenValue) }),
  fc.record({ kind: fc.constant("clone" as const), object: fc.nat(), id: fc.oneof(fc.nat({ max: 30 }).map((n) => `Ref:${n}`), xenString) }),
  fc.record({ kind: fc.constant("drop" as const), object: fc.nat() }),
  fc.record({ kind: fc.constant("version" as const), field: fc.constantFrom(...VERSION_FIELDS), value: fc.oneof(xenValue, fc.integer({ min: -1, max: 100 }).map(String)) }),
  fc.record({ kind: fc.constant("text" as const), text: fc.oneof(fc.constantFrom("<value>", "</value>", "</struct>", "<array><data>", "&amp;", "&#0;", "\u0000", "<!--"), fc.string()), at: fc.nat() }),
);

const tarEdit = fc.oneof(
  fc.record({ kind: fc.constant("field" as const), member: fc.nat(), field: fc.constantFrom(...(Object.keys(FIELDS) as Field[])), value: fieldValue, keepChecksum: fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, fc.constant(false)) }),
  fc.record({ kind: fc.constant("special" as const), member: fc.nat(), special: specialMember }),
  fc.record({ kind: fc.constant("drop" as const), member: fc.nat() }),
  fc.record({ kind: fc.constant("repeat" as const), member: fc.nat() }),
  fc.record({ kind: fc.constant("swap" as const), member: fc.nat(), other: fc.nat() }),
  fc.record({ kind: fc.constant("rename" as const), member: fc.nat(), like: fc.nat(), suffix: fc.constantFrom("", ".xxhash", ".checksum", "/", "x"), counter: fc.option(fc.nat({ max: 99_999_999 })) }),
  fc.record({ kind: fc.constant("data" as const), member: fc.nat(), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant("resize" as const), member: fc.nat(), length: fc.oneof(fc.nat({ max: 2000 }), fc.constantFrom(...SIZES.filter((n) => n <= 2 * MiB))) }),
  fc.record({ kind: fc.constant("ova" as const), edit: ovaEdit }),
);

/** A position in the bytes: near a member's start (its header and first data) or anywhere. */
const position = fc.oneof(fc.record({ member: fc.nat(), offset: fc.nat({ max: 1100 }) }), fc.record({ millionths: fc.nat({ max: 1_000_000 }) }));
type Position = { member: number; offset: number } | { millionths: number };

const byteEdit = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("flip" as const), at: position, mask: fc.integer({ min: 1, max: 255 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("truncate" as const), at: position }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("delete" as const), at: position, length: fc.oneof(fc.nat({ max: 600 }), fc.constant(BLOCK)) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("insert" as const), at: position, bytes: fc.oneof({ weight: 3, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 600 }) }, fc.constantFrom(BLOCK, 2 * BLOCK).map((n) => new Uint8Array(n))) }) },
);

export const archiveMutation = fc.record({
  tar: fc.array(tarEdit, { maxLength: 3 }),
  bytes: fc.array(byteEdit, { maxLength: 2 }),
  compression: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, fc.record({ kind: fc.constantFrom("gzip" as const, "zstd" as const), split: fc.option(fc.nat({ max: 1_000_000 })), edits: fc.array(byteEdit, { maxLength: 2 }) })),
});
export type ArchiveMutation = typeof archiveMutation extends fc.Arbitrary<infer T> ? T : never;

/** Mutations of ova.xml alone, the archive otherwise whole: what reaches the importer's records, and its undo. */
export const ovaMutation: fc.Arbitrary<ArchiveMutation> = fc.record({
  tar: fc.array(ovaEdit.map((edit) => ({ kind: "ova" as const, edit })), { minLength: 1, maxLength: 3 }),
  bytes: fc.constant([]),
  compression: fc.constant(null),
});
type TarEdit = ArchiveMutation["tar"][number];
type ByteEdit = ArchiveMutation["bytes"][number];
type OvaEdit = Extract<TarEdit, { kind: "ova" }>["edit"];

/** A member with what the edits did to its header: fields written after the size, and a checksum left wrong. */
type Edited = { header: Buffer; data: Buffer; fields: Array<[Field, string]>; badChecksum: boolean };

function writeField(header: Buffer, field: Field, value: string): void {
  const [offset, length] = FIELDS[field];
  header.fill(0, offset, offset + length);
  header.write(value, offset, length, "latin1");
}

function writeChecksum(header: Buffer): void {
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8, "latin1");
}

/** A new member's header: a ustar file header of `type` named `name`. */
function newHeader(name: string, type: string): Buffer {
  const header = Buffer.alloc(BLOCK);
  writeField(header, "name", name);
  writeField(header, "mode", "0000644\0");
  writeField(header, "uid", "0000000\0");
  writeField(header, "gid", "0000000\0");
  writeField(header, "mtime", octal(0, 11));
  writeField(header, "type", type);
  writeField(header, "magic", "ustar\0");
  writeField(header, "version", "00");
  return header;
}

function nameOf(member: Edited): string {
  return member.header.toString("latin1", 0, 100).replace(/\0.*$/s, "");
}

function applyOvaEdit(xml: string, edit: OvaEdit): string {
  if (edit.kind === "text") {
    const at = edit.at % (xml.length + 1);
    return xml.slice(0, at) + edit.text + xml.slice(at);
  }
  let document: XenValue;
  try {
    document = parseXmlRpcValue(xml);
  } catch {
    return xml;
  }
  if (document === null || typeof document !== "object" || Array.isArray(document)) return xml;
  const root = document as XenRecord;
  const objects = Array.isArray(root.objects) ? root.objects : [];
  const pick = (n: number) => (objects.length === 0 ? undefined : objects[n % objects.length]);
  const recordOf = (value: XenValue | undefined) => (value !== null && typeof value === "object" && !Array.isArray(value) ? (value as XenRecord) : undefined);
  if (edit.kind === "version") {
    const version = recordOf(root.version);
    if (version !== undefined) version[edit.field] = edit.value;
  } else if (edit.kind === "drop") {
    if (objects.length > 0) objects.splice(edit.object % objects.length, 1);
  } else if (edit.kind === "clone") {
    const object = recordOf(pick(edit.object));
    if (object !== undefined) objects.push({ ...object, id: edit.id });
  } else if (edit.kind === "top") {
    const object = recordOf(pick(edit.object));
    if (object !== undefined) object[edit.field] = edit.value;
  } else {
    const snapshot = recordOf(recordOf(pick(edit.object))?.snapshot);
    if (snapshot !== undefined) Object.defineProperty(snapshot, edit.field, { value: edit.value, enumerable: true, writable: true, configurable: true });
  }
  return encodeXmlRpcValue(root);
}

function applyTarEdit(members: Edited[], edit: TarEdit): void {
  if (edit.kind === "ova") {
    const ova = members.find((member) => nameOf(member) === "ova.xml");
    if (ova !== undefined) ova.data = Buffer.from(applyOvaEdit(ova.data.toString("utf8"), edit.edit), "utf8");
    return;
  }
  if (members.length === 0) return;
  const index = edit.member % members.length;
  const member = members[index]!;
  switch (edit.kind) {
    case "field":
      member.fields.push([edit.field, edit.value]);
      member.badChecksum ||= !edit.keepChecksum;
      return;
    case "special": {
      const { type, text } = edit.special;
      const data = Buffer.from(type === "L" || type === "K" ? `${text}\0` : text, "latin1");
      const header = newHeader(type === "L" || type === "K" ? "././@LongLink" : type === "x" || type === "g" ? "PaxHeader/x" : "fuzz", type);
      if (type === "1" || type === "2") writeField(header, "linkname", text === "" ? "ova.xml" : text);
      members.splice(index, 0, { header, data, fields: [], badChecksum: false });
      return;
    }
    case "drop":
      members.splice(index, 1);
      return;
    case "repeat":
      members.splice(index, 0, { ...member, header: Buffer.from(member.header), fields: [...member.fields] });
      return;
    case "swap": {
      const other = edit.other % members.length;
      [members[index], members[other]] = [members[other]!, member];
      return;
    }
    case "rename": {
      let name = nameOf(members[edit.like % members.length]!);
      if (edit.counter !== null) name = name.replace(/\d{8}/, String(edit.counter).padStart(8, "0"));
      member.fields.push(["name", name + edit.suffix]);
      return;
    }
    case "data": {
      if (member.data.length === 0) return;
      const data = Buffer.from(member.data);
      const bytes = edit.bytes.subarray(0, data.length);
      data.set(bytes, edit.at % (data.length - bytes.length + 1));
      member.data = data;
      return;
    }
    case "resize": {
      const data = Buffer.alloc(edit.length);
      member.data.copy(data, 0, 0, Math.min(edit.length, member.data.length));
      member.data = data;
      return;
    }
  }
}

/** The members as tar bytes (size fields follow the data unless an edit set them), and where each member starts. */
function tarBytes(members: readonly Edited[]): { bytes: Buffer; starts: number[] } {
  const parts: Buffer[] = [];
  const starts: number[] = [];
  let at = 0;
  for (const member of members) {
    const header = Buffer.from(member.header);
    writeField(header, "size", octal(member.data.length, 11));
    for (const [field, value] of member.fields) writeField(header, field, value);
    // A checksum field an edit wrote stays as written; otherwise it is made right, then wrong when asked.
    if (!member.fields.some(([field]) => field === "checksum")) {
      writeChecksum(header);
      if (member.badChecksum) header[153] = header[153]! ^ 0x01;
    }
    const padding = Buffer.alloc((BLOCK - (member.data.length % BLOCK)) % BLOCK);
    starts.push(at);
    parts.push(header, member.data, padding);
    at += BLOCK + member.data.length + padding.length;
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  return { bytes: Buffer.concat(parts), starts };
}

function offsetOf(at: Position, length: number, starts: readonly number[]): number {
  if ("millionths" in at) return Math.floor((at.millionths / 1_000_000) * length);
  if (starts.length === 0) return Math.min(length, at.offset);
  return Math.min(length, starts[at.member % starts.length]! + at.offset);
}

function applyByteEdit(bytes: Buffer, edit: ByteEdit, starts: readonly number[]): Buffer {
  const at = offsetOf(edit.at, bytes.length, starts);
  switch (edit.kind) {
    case "flip": {
      if (at >= bytes.length) return bytes;
      const out = Buffer.from(bytes);
      out[at] = out[at]! ^ edit.mask;
      return out;
    }
    case "truncate":
      return bytes.subarray(0, at);
    case "delete":
      return Buffer.concat([bytes.subarray(0, at), bytes.subarray(Math.min(bytes.length, at + edit.length))]);
    case "insert":
      return Buffer.concat([bytes.subarray(0, at), edit.bytes, bytes.subarray(at)]);
  }
}

/** The seed with the mutation applied: the bytes an importer would receive. */
export function mutatedArchive(seed: SeedArchive, mutation: ArchiveMutation): Buffer {
  const members: Edited[] = seed.members.map((member) => ({ header: member.header, data: member.data, fields: [], badChecksum: false }));
  for (const edit of mutation.tar) applyTarEdit(members, edit);
  const { bytes: tar, starts } = tarBytes(members);
  let bytes = mutation.bytes.reduce((out, edit) => applyByteEdit(out, edit, starts), tar);
  const compression = mutation.compression;
  if (compression === null) return bytes;
  const compress = compression.kind === "gzip" ? (data: Buffer) => gzipSync(data, { level: 1 }) : (data: Buffer) => zstdCompressSync(data);
  // Split: two members or frames, as our parallel compressor and pigz write them.
  const cut = Math.floor(((compression.split ?? 1_000_000) / 1_000_000) * bytes.length);
  const pieces = compression.split === null ? [bytes] : [bytes.subarray(0, cut), bytes.subarray(cut)];
  bytes = Buffer.concat(pieces.map(compress));
  return compression.edits.reduce((out, edit) => applyByteEdit(out, edit, []), bytes);
}
