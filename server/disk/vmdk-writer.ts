// A disk written out as a streamOptimized VMDK, laid out as VMware writes one (Virtual Disk Format 5.0): a header
// whose grain directory is "at the end", the embedded descriptor, then each grain the disk needs as {lba, size}
// and its deflated bytes, each grain table behind a marker once its grains are out, the grain directory behind a
// marker, a footer (the header again, now with the directory's offset) and the end-of-stream marker. One pass, in
// disk order; only the grain table being filled and the directory are held. The file's length is not known
// before the end (compression), except when written `sized`: each grain of the carried blocks is then stored
// (deflate's uncompressed blocks), zero or not, so that vmdkLength says the length from the block map before the
// first byte, as an OVA's tar header needs it.
// A delta names its parent in the descriptor (parentCID, parentFileNameHint): its grains are the carried blocks'
// (zero or not, since a zero grain must hide the parent's), and a grain it leaves out reads as the parent's.
import { createHash } from "node:crypto";
import { setImmediate } from "node:timers/promises";
import { deflateSync } from "node:zlib";
import { isZeroBlock } from "../xva/format.ts";
import { CarriedBlocks, carriedMap, type DiskSource, SOURCE_BLOCK } from "./source.ts";
import { FLAGS, GD_AT_END, MAGIC, MARKER, SECTOR } from "./vmdk.ts";

/** 64 KiB grains and 512-entry tables, as VMware and qemu write them: a table maps 32 MiB of disk. */
const GRAIN_SECTORS = 128;
const GRAIN = GRAIN_SECTORS * SECTOR;
const GTES = 512;
const GT_SECTORS = (GTES * 4) / SECTOR;
/** Room for the descriptor, as qemu leaves (10 KiB: a parent's file name fits). */
const DESCRIPTOR_SECTORS = 20;
/** The first grain starts at 64 KiB, as in qemu's files. */
const OVERHEAD = 128;
/** Grain table entries are 32-bit sector numbers: the file cannot pass 2 TiB. */
const MAX_FILE_SECTOR = 0xffff_ffff;
const CID = /^[0-9a-f]{8}$/i;
/** A file name put in the descriptor between quotes, on one line. */
const FILE_NAME = /^[^"\p{Cc}]+$/u;

export interface VmdkWriteOptions {
  /** The name the descriptor's extent line gives this file (the name it is saved under). */
  fileName: string;
  /** This disk's content ID, 8 hex digits (see vmdkCid): a delta of it names it as its parent's. */
  cid: string;
  /** For a delta: the parent's file name (a hint, relative to this file) and content ID. */
  parent?: { fileName: string; cid: string };
  /** zlib's level, 1 (default: level 6 costs several times the CPU on compressible data for a little less size) to 9. */
  compressionLevel?: number;
  /** Grains stored, not compressed: a length known in advance (vmdkLength). */
  sized?: boolean;
}

/** Deflate's largest uncompressed block. */
const STORED_BLOCK = 65_535;

/** The zlib stream of `data` in deflate's uncompressed blocks: 2 bytes of header, 5 a block, 4 of Adler-32. */
function stored(data: Buffer): Buffer {
  const blocks = Math.max(1, Math.ceil(data.length / STORED_BLOCK));
  const out = Buffer.alloc(2 + 5 * blocks + data.length + 4);
  out[0] = 0x78;
  out[1] = 0x01;
  let at = 2;
  for (let block = 0; block < blocks; block++) {
    const piece = data.subarray(block * STORED_BLOCK, (block + 1) * STORED_BLOCK);
    out[at] = block === blocks - 1 ? 1 : 0;
    out.writeUInt16LE(piece.length, at + 1);
    out.writeUInt16LE(~piece.length & 0xffff, at + 3);
    piece.copy(out, at + 5);
    at += 5 + piece.length;
  }
  out.writeUInt32BE(adler32(data), at);
  return out;
}

function adler32(data: Buffer): number {
  let a = 1;
  let b = 0;
  // 5552 bytes at most between reductions keep b within 2^32 (zlib's NMAX).
  for (let at = 0; at < data.length; ) {
    const end = Math.min(data.length, at + 5552);
    for (; at < end; at++) {
      a += data[at]!;
      b += a;
    }
    a %= 65_521;
    b %= 65_521;
  }
  return ((b << 16) | a) >>> 0;
}

/** A grain's bytes in the file: its {lba, size} and stored data, padded to whole sectors. */
function storedGrainBytes(length: number): number {
  return Math.ceil((12 + 2 + 5 * Math.max(1, Math.ceil(length / STORED_BLOCK)) + length + 4) / SECTOR) * SECTOR;
}

/** The length of the VMDK writeVmdk writes `sized` for a disk of `virtualSize` carrying the blocks of `map`. */
export function vmdkLength(map: Uint8Array, virtualSize: number): number {
  const diskBytes = Math.ceil(virtualSize / SECTOR) * SECTOR;
  const gdEntries = Math.ceil(diskBytes / (GRAIN * GTES));
  let length = OVERHEAD * SECTOR;
  let tables = 0;
  let lastTable = -1;
  for (let index = 0; index < map.length; index++) {
    if (map[index] !== 1) continue;
    const blockEnd = Math.min(virtualSize, (index + 1) * SOURCE_BLOCK);
    for (let guest = index * SOURCE_BLOCK; guest < blockEnd; guest += GRAIN) {
      length += storedGrainBytes(Math.min(GRAIN, diskBytes - guest));
      const table = Math.floor(guest / GRAIN / GTES);
      if (table !== lastTable) {
        tables++;
        lastTable = table;
      }
    }
  }
  const gdBytes = Math.ceil((gdEntries * 4) / SECTOR) * SECTOR;
  return length + tables * (SECTOR + GTES * 4) + SECTOR + gdBytes + 3 * SECTOR;
}

/** A content ID derived from `seed` (a VDI's uuid, say), so that a delta exported later can name its parent's. */
export function vmdkCid(seed: string): string {
  const cid = createHash("sha256").update(seed).digest("hex").slice(0, 8);
  // ffffffff is what parentCID says when there is no parent.
  return cid === "ffffffff" ? "fffffffe" : cid;
}

/** The VMDK's bytes, in pieces of up to about a source block, pulled as the consumer takes them. */
export async function* writeVmdk(source: DiskSource, options: VmdkWriteOptions): AsyncGenerator<Buffer> {
  const level = options.compressionLevel ?? 1;
  if (!Number.isInteger(level) || level < 1 || level > 9) throw new RangeError(`compression level ${level} is not from 1 to 9`);
  const delta = options.parent !== undefined;
  const capacity = Math.ceil(source.virtualSize / SECTOR);
  // A size off a sector boundary ends in a sector of zeros: the image holds whole sectors.
  const diskBytes = capacity * SECTOR;
  const gdEntries = Math.ceil(diskBytes / (GRAIN * GTES));
  const gd = Buffer.alloc(Math.ceil((gdEntries * 4) / SECTOR) * SECTOR);
  const header = vmdkHeader(capacity);

  const descriptor = Buffer.from(descriptorText(capacity, options), "utf8");
  if (descriptor.length > DESCRIPTOR_SECTORS * SECTOR) throw new RangeError(`a descriptor of ${descriptor.length} bytes does not fit in ${DESCRIPTOR_SECTORS} sectors: the file names are too long`);
  const head = Buffer.alloc(OVERHEAD * SECTOR);
  header.copy(head);
  descriptor.copy(head, SECTOR);
  yield head;

  let sector = OVERHEAD;
  /** The file sector of a piece of `bytes` put next; past 2 TiB no table entry can name it. */
  const place = (bytes: number) => {
    const at = sector;
    if (at > MAX_FILE_SECTOR) throw new RangeError(`the VMDK passes 2 TiB, past what a grain table's 32-bit sector numbers reach`);
    sector += bytes / SECTOR;
    return at;
  };
  let table: Buffer | undefined;
  let tableIndex = 0;
  /** The filled table behind its marker; its directory entry points past the marker. */
  const closeTable = (): Buffer[] => {
    if (table === undefined) return [];
    const out = [marker(GT_SECTORS, MARKER.gt), table];
    place(SECTOR);
    gd.writeUInt32LE(place(table.length), tableIndex * 4);
    table = undefined;
    return out;
  };

  for await (const { index, data } of new CarriedBlocks(source, carriedMap(source)).each()) {
    const out: Buffer[] = [];
    for (let at = 0; at < data.length; at += GRAIN) {
      const guest = index * SOURCE_BLOCK + at;
      const grainIndex = guest / GRAIN;
      if (Math.floor(grainIndex / GTES) !== tableIndex) {
        out.push(...closeTable());
        tableIndex = Math.floor(grainIndex / GTES);
      }
      let plain = data.subarray(at, at + GRAIN);
      // In a full disk what no grain holds reads as zeros already; in a delta it would read as the parent.
      if (!delta && !options.sized && isZeroBlock(plain)) continue;
      // The last grain holds only what is inside the disk (as VMware and qemu write it), in whole sectors.
      const inDisk = Math.min(GRAIN, diskBytes - guest);
      if (plain.length < inDisk) plain = Buffer.concat([plain, Buffer.alloc(inDisk - plain.length)]);
      const compressed = options.sized === true ? stored(plain) : deflateSync(plain, { level });
      const grain = Buffer.alloc(Math.ceil((12 + compressed.length) / SECTOR) * SECTOR);
      grain.writeBigUInt64LE(BigInt(guest / SECTOR), 0);
      grain.writeUInt32LE(compressed.length, 8);
      compressed.copy(grain, 12);
      table ??= Buffer.alloc(GTES * 4);
      table.writeUInt32LE(place(grain.length), (grainIndex % GTES) * 4);
      out.push(grain);
    }
    if (out.length > 0) yield Buffer.concat(out);
    // Deflate is synchronous: a turn of the event loop between blocks (up to ~20 ms of incompressible data).
    await setImmediate();
  }
  const tail = closeTable();
  tail.push(marker(gd.length / SECTOR, MARKER.gd));
  place(SECTOR);
  const gdOffset = place(gd.length);
  tail.push(gd);
  const footer = Buffer.from(header);
  footer.writeBigUInt64LE(BigInt(gdOffset), 56);
  tail.push(marker(1, MARKER.footer), footer, marker(0, MARKER.eos));
  yield Buffer.concat(tail);
}

/** The sparse extent header of a streamOptimized file, its grain directory at the end. */
function vmdkHeader(capacity: number): Buffer {
  const header = Buffer.alloc(SECTOR);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt32LE(3, 4);
  header.writeUInt32LE(FLAGS.newlineTest | FLAGS.compressed | FLAGS.markers, 8);
  header.writeBigUInt64LE(BigInt(capacity), 12);
  header.writeBigUInt64LE(BigInt(GRAIN_SECTORS), 20);
  header.writeBigUInt64LE(1n, 28);
  header.writeBigUInt64LE(BigInt(DESCRIPTOR_SECTORS), 36);
  header.writeUInt32LE(GTES, 44);
  header.writeBigUInt64LE(GD_AT_END, 56);
  header.writeBigUInt64LE(BigInt(OVERHEAD), 64);
  // Bytes a transfer in text mode would alter.
  header.write("\n \r\n", 73, "latin1");
  header.writeUInt16LE(1, 77); // deflate
  return header;
}

function descriptorText(capacity: number, options: VmdkWriteOptions): string {
  const { cid, parent } = options;
  for (const c of [cid, parent?.cid]) if (c !== undefined && !CID.test(c)) throw new RangeError(`content ID "${c}" is not 8 hex digits`);
  for (const name of [options.fileName, parent?.fileName]) if (name !== undefined && !FILE_NAME.test(name)) throw new RangeError(`file name ${JSON.stringify(name)} cannot go in a descriptor (empty, a quote or a control character)`);
  // SCSI geometry as qemu and VMware give it: 255 heads of 63 sectors, the cylinders that fit.
  const cylinders = Math.max(1, Math.floor(capacity / (255 * 63)));
  return [
    "# Disk DescriptorFile",
    "version=1",
    'encoding="UTF-8"',
    `CID=${cid.toLowerCase()}`,
    `parentCID=${parent === undefined ? "ffffffff" : parent.cid.toLowerCase()}`,
    ...(parent === undefined ? [] : [`parentFileNameHint="${parent.fileName}"`]),
    'createType="streamOptimized"',
    "",
    "# Extent description",
    `RW ${capacity} SPARSE "${options.fileName}"`,
    "",
    "# The Disk Data Base",
    "#DDB",
    "",
    'ddb.adapterType = "lsilogic"',
    `ddb.geometry.cylinders = "${cylinders}"`,
    'ddb.geometry.heads = "255"',
    'ddb.geometry.sectors = "63"',
    'ddb.virtualHWVersion = "4"',
    "",
  ].join("\n");
}

/** A marker: `sectors` of metadata follow it (none for end-of-stream). */
function marker(sectors: number, type: number): Buffer {
  const m = Buffer.alloc(SECTOR);
  m.writeBigUInt64LE(BigInt(sectors), 0);
  m.writeUInt32LE(type, 12);
  return m;
}
