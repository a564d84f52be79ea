// VMDK hosted sparse extents (VMware's Virtual Disk Format 5.0), the two single-file shapes VMware and qemu write,
// read as a stream. All fields are little-endian; offsets and sizes count 512-byte sectors.
// - monolithicSparse: a header, the embedded descriptor, a grain directory (GD) naming grain tables (GTs) naming
//   grains, in whatever order the file holds them: read in one pass as qcow2 is (./any-order.ts).
// - streamOptimized: after the header, every grain carries its own disk address ({lba, size} then deflated data)
//   and metadata comes in markers; the GD and GTs are not needed, so grains are written as they arrive and what no
//   grain covered is zeros at the end-of-stream marker (or at the end of the file, where qemu-img writes none).
import { inflateSync } from "node:zlib";
import { AnyOrder } from "./any-order.ts";
import type { ByteReader } from "./byte-reader.ts";
import { type DiskImage, DiskImageError, type DiskRun } from "./image.ts";
import { dataRuns, ZeroRuns } from "./runs.ts";

export const SECTOR = 512;
export const MAGIC = 0x564d444b; // "KDMV"
export const FLAGS = { newlineTest: 1, zeroedGrain: 4, compressed: 1 << 16, markers: 1 << 17 } as const;
export const GD_AT_END = 0xffffffffffffffffn;
export const MARKER = { eos: 0, gt: 1, gd: 2, footer: 3 } as const;
/** The largest virtual size taken (every offset stays exact). */
const MAX_SIZE = 2 ** 50;
/** qemu's limits: grains up to 2 MiB (here from 4 KiB, VMware's smallest), up to 512 entries per grain table. */
const MIN_GRAIN = 8;
const MAX_GRAIN = 4096;
const MAX_GTES = 512;
/** The embedded descriptor is text of a few hundred bytes; qemu reads at most 1 MiB of it. */
const MAX_DESCRIPTOR = 2048;
const MAX_PENDING = 1 << 22;
/** 16 MiB of grain directory, read as one table (qcow2's L1 may be 32 MiB). */
const MAX_GD_ENTRIES = 1 << 22;

function fail(message: string, offset?: number): never {
  throw new DiskImageError(message, offset);
}

function u64(buffer: Buffer, at: number, what: string): number {
  const value = buffer.readBigUInt64LE(at);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) fail(`${what} ${value} is out of range`, at);
  return Number(value);
}

interface Header {
  flags: number;
  capacity: number;
  grainSize: number;
  gtes: number;
  gdOffset: number | "end";
  overHead: number;
  compressed: boolean;
}

async function readHeader(reader: ByteReader): Promise<Header> {
  const header = await reader.read(SECTOR, "the VMDK header");
  if (header.readUInt32LE(0) !== MAGIC) fail("no VMDK sparse extent magic (KDMV) at byte 0", 0);
  const version = header.readUInt32LE(4);
  if (version < 1 || version > 3) fail(`VMDK version ${version}: versions 1 to 3 are read`, 4);
  const flags = header.readUInt32LE(8);
  if (flags & FLAGS.newlineTest && header.toString("latin1", 73, 77) !== "\n \r\n") fail("the end-of-line test bytes are altered: the file was sent as text, which breaks it; send it as binary", 73);
  const capacity = u64(header, 12, "the capacity") * SECTOR;
  if (capacity === 0 || capacity > MAX_SIZE) fail(`capacity ${capacity} bytes is not from one sector to ${MAX_SIZE} bytes`, 12);
  const grainSize = u64(header, 20, "the grain size");
  if (grainSize < MIN_GRAIN || grainSize > MAX_GRAIN || (grainSize & (grainSize - 1)) !== 0) fail(`grain size ${grainSize} sectors is not a power of two from ${MIN_GRAIN} to ${MAX_GRAIN}`, 20);
  const gtes = header.readUInt32LE(44);
  if (gtes < 1 || gtes > MAX_GTES) fail(`${gtes} entries per grain table is not from 1 to ${MAX_GTES}`, 44);
  const rawGd = header.readBigUInt64LE(56);
  const gdOffset = rawGd === GD_AT_END ? "end" : u64(header, 56, "the grain directory offset");
  const overHead = u64(header, 64, "the overhead");
  const compressed = (flags & FLAGS.compressed) !== 0;
  const algorithm = header.readUInt16LE(77);
  if (compressed ? algorithm !== 1 : algorithm !== 0) fail(`compression algorithm ${algorithm} with the compressed flag ${compressed ? "set" : "clear"}: deflate (1) for compressed grains, none (0) otherwise`, 77);
  if (compressed !== ((flags & FLAGS.markers) !== 0)) fail("compressed grains without markers, or markers without compression: no VMware or qemu shape", 8);
  const descriptorOffset = u64(header, 28, "the descriptor offset");
  const descriptorSize = u64(header, 36, "the descriptor size");
  if (descriptorSize > MAX_DESCRIPTOR) fail(`a descriptor of ${descriptorSize} sectors is over ${MAX_DESCRIPTOR}`, 36);
  if (descriptorOffset !== 0 && descriptorSize > 0) {
    if (descriptorOffset < 1) fail(`descriptor offset ${descriptorOffset} lies inside the header`, 28);
    await reader.skipTo(descriptorOffset * SECTOR, "the embedded descriptor");
    checkDescriptor((await reader.read(descriptorSize * SECTOR, "the embedded descriptor")).toString("latin1"), descriptorOffset * SECTOR, capacity);
  }
  return { flags, capacity, grainSize, gtes, gdOffset, overHead, compressed };
}

/** The embedded descriptor: one sparse extent in this file, no parent. */
function checkDescriptor(text: string, at: number, capacity: number): void {
  const lines = text.slice(0, text.includes("\0") ? text.indexOf("\0") : undefined).split(/\r?\n/);
  const value = (key: string) => {
    const line = lines.find((l) => l.trim().toLowerCase().startsWith(`${key.toLowerCase()}=`) || l.trim().toLowerCase().startsWith(`${key.toLowerCase()} =`));
    return line?.slice(line.indexOf("=") + 1).trim().replace(/^"(.*)"$/, "$1");
  };
  const type = value("createType");
  if (type !== undefined && type !== "monolithicSparse" && type !== "streamOptimized") fail(`createType "${type}": only monolithicSparse and streamOptimized VMDKs hold their disk in one file`, at);
  const parent = value("parentCID");
  if (parent !== undefined && parent.toLowerCase() !== "ffffffff") fail(`the VMDK is a delta of another disk (parentCID=${parent}): import the chain flattened (qemu-img convert the top image)`, at);
  const extents = lines.filter((l) => /^\s*(RW|RDONLY|NOACCESS)\s+\d+/.test(l));
  if (extents.length > 1) fail(`the descriptor names ${extents.length} extents: only single-extent VMDKs are one file`, at);
  const sectors = extents[0]?.trim().split(/\s+/)[1];
  if (sectors !== undefined && Number(sectors) * SECTOR !== capacity) fail(`the descriptor's extent of ${sectors} sectors differs from the header's capacity of ${capacity / SECTOR}`, at);
}

export interface VmdkOptions {
  /** The file's size when the request says it. */
  length?: number;
  /** Where grains met before their table are kept aside (monolithicSparse). */
  spillDir: string;
}

/** Opens a VMDK arriving on `reader`: the header and descriptor are read and checked; the rest comes with the runs. */
export async function openVmdk(reader: ByteReader, options: VmdkOptions): Promise<DiskImage> {
  const header = await readHeader(reader);
  const directory = Math.ceil(header.capacity / (header.grainSize * SECTOR * header.gtes));
  if (!header.compressed && directory > MAX_GD_ENTRIES) fail(`a grain directory of ${directory} entries is over ${MAX_GD_ENTRIES}`, 44);
  const runs = header.compressed ? streamRuns(reader, header, options) : sparseRuns(reader, header, options);
  return { format: "vmdk", virtualSize: header.capacity, differencing: false, runs };
}

type SparseTarget = { kind: "gd"; start: number; entryAt: number } | { kind: "gt"; start: number; index: number; entryAt: number } | { kind: "grain"; start: number; guest: number; entryAt: number };

async function* sparseRuns(reader: ByteReader, header: Header, options: VmdkOptions): AsyncGenerator<DiskRun> {
  const { capacity, gtes } = header;
  const grainBytes = header.grainSize * SECTOR;
  const gtSpan = grainBytes * gtes;
  const gdEntries = Math.ceil(capacity / gtSpan);
  const zeroGrains = (header.flags & FLAGS.zeroedGrain) !== 0;
  if (header.gdOffset === "end") fail("a sparse VMDK without compressed grains has its grain directory at the end: no VMware or qemu shape", 56);
  const file = new AnyOrder<SparseTarget>(reader, { spillDir: options.spillDir, maxPending: MAX_PENDING });
  const zeros = new ZeroRuns(capacity);
  const inFile = (sector: number, length: number, what: string, entryAt: number) => {
    if (sector < 1) fail(`${what} lies inside the header`, entryAt);
    if (options.length !== undefined && sector * SECTOR + length > options.length) fail(`${what} at byte ${sector * SECTOR} ends past the file's ${options.length} bytes`, entryAt);
  };
  inFile(header.gdOffset, gdEntries * 4, "the grain directory", 56);
  file.push({ kind: "gd", start: header.gdOffset * SECTOR, entryAt: 56 });
  file.tablesUnread = 1;
  try {
    for (let target = file.next(); target !== undefined; target = file.next()) {
      if (target.kind === "gd") {
        const gd = await file.bytes(target.start, gdEntries * 4, "the grain directory", 56);
        file.tablesUnread--;
        for (let index = 0; index < gdEntries; index++) {
          if (index % 65_536 === 65_535) await new Promise((resolve) => setImmediate(resolve));
          const sector = gd.readUInt32LE(index * 4);
          const entryAt = target.start + index * 4;
          if (sector === 0) {
            yield* zeros.add(index * gtSpan, gtSpan);
            continue;
          }
          inFile(sector, gtes * 4, `the grain table of directory entry ${index}`, entryAt);
          file.push({ kind: "gt", start: sector * SECTOR, index, entryAt });
          file.tablesUnread++;
        }
        yield* zeros.flush();
      } else if (target.kind === "gt") {
        const gt = await file.bytes(target.start, gtes * 4, `the grain table of directory entry ${target.index}`, target.entryAt);
        file.tablesUnread--;
        for (let i = 0; i < gtes; i++) {
          const guest = (target.index * gtes + i) * grainBytes;
          if (guest >= capacity) break;
          const sector = gt.readUInt32LE(i * 4);
          const entryAt = target.start + i * 4;
          if (sector === 0 || (sector === 1 && zeroGrains)) {
            yield* zeros.add(guest, grainBytes);
            continue;
          }
          inFile(sector, grainBytes, `the grain of disk offset ${guest}`, entryAt);
          file.push({ kind: "grain", start: sector * SECTOR, guest, entryAt });
        }
        yield* zeros.flush();
      } else {
        yield* dataRuns(target.guest, await file.bytes(target.start, grainBytes, `the grain of disk offset ${target.guest}`, target.entryAt), capacity);
      }
    }
    await file.finish(options.length);
  } finally {
    await file.close();
  }
}

async function* streamRuns(reader: ByteReader, header: Header, options: VmdkOptions): AsyncGenerator<DiskRun> {
  const { capacity } = header;
  const grainBytes = header.grainSize * SECTOR;
  const grains = Math.ceil(capacity / grainBytes);
  const seen = new GrainSet();
  if (header.overHead < 1) fail(`overhead ${header.overHead} sectors leaves no room for the header`, 64);
  await reader.skipTo(header.overHead * SECTOR, "the first grain");
  for (;;) {
    const at = reader.position;
    // qemu-img ends its files after the last grain, with no end-of-stream marker (VMware writes one).
    if (await reader.atEnd()) break;
    const head = await reader.read(12, "a grain or marker header");
    const lba = u64(head, 0, "the grain's disk sector");
    const size = head.readUInt32LE(8);
    if (size === 0) {
      const rest = await reader.read(SECTOR - 12, "a marker");
      const type = rest.readUInt32LE(0);
      if (type === MARKER.eos) break;
      if (type !== MARKER.gt && type !== MARKER.gd && type !== MARKER.footer) fail(`marker type ${type} is none of end-of-stream (0), grain table (1), grain directory (2), footer (3)`, at + 12);
      // The tables and the footer repeat what the grains already said: passed over.
      await reader.skipTo(reader.position + lba * SECTOR, "the metadata after a marker");
      continue;
    }
    const guest = lba * SECTOR;
    if (guest % grainBytes !== 0 || guest >= capacity) fail(`a grain at disk sector ${lba}, not the start of a grain inside the disk's ${capacity / SECTOR} sectors`, at);
    if (size > 2 * grainBytes + SECTOR) fail(`a grain of ${size} compressed bytes, more than a grain's worth`, at + 8);
    if (!seen.add(guest / grainBytes)) fail(`a second grain for disk offset ${guest}`, at);
    // A view of the received bytes, inflated before the reader moves on.
    const compressed = await reader.readView(size, `the grain of disk offset ${guest}`);
    let data: Buffer;
    try {
      // An output chunk one byte larger than a grain: zlib fills it in one step, and the grain is that chunk (the
      // 16 KiB default made five buffers and a concat per grain).
      data = inflateSync(compressed, { maxOutputLength: grainBytes, chunkSize: grainBytes + 1 });
    } catch (error) {
      fail(`the grain of disk offset ${guest} does not inflate to one grain: ${(error as Error).message}`, at + 12);
    }
    await reader.skipTo(at + Math.ceil((12 + size) / SECTOR) * SECTOR, "the padding after a grain");
    if (data.length !== grainBytes && data.length !== capacity - guest) fail(`the grain of disk offset ${guest} inflates to ${data.length} bytes, not a grain's ${grainBytes}`, at + 12);
    yield* dataRuns(guest, data, capacity);
  }
  // What no grain covered is zeros.
  const zeros = new ZeroRuns(capacity);
  let gaps = 0;
  for (const [first, count] of seen.gaps(grains)) {
    yield* zeros.add(first * grainBytes, count * grainBytes);
    if (++gaps % 4096 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  yield* zeros.flush();
  // After the end-of-stream marker: padding only.
  while ((await reader.readUpTo(65_536)).length > 0) if (options.length !== undefined && reader.position > options.length) fail(`the body goes on past the file's ${options.length} bytes`, options.length);
}

/** Grain indexes, one bit each in pages made as grains arrive: memory follows what the file holds, not the disk. */
class GrainSet {
  static readonly PAGE = 1 << 16;
  readonly #pages = new Map<number, Uint8Array>();

  /** Adds `index`; false when it was there. */
  add(index: number): boolean {
    const key = Math.floor(index / GrainSet.PAGE);
    let page = this.#pages.get(key);
    if (page === undefined) this.#pages.set(key, (page = new Uint8Array(GrainSet.PAGE / 8)));
    const bit = index % GrainSet.PAGE;
    if (page[bit >> 3]! & (1 << (bit & 7))) return false;
    page[bit >> 3]! |= 1 << (bit & 7);
    return true;
  }

  /** The runs of indexes below `count` not added, as [first, length], a page at a time. */
  *gaps(count: number): Generator<[number, number]> {
    for (let base = 0; base < count; base += GrainSet.PAGE) {
      const page = this.#pages.get(base / GrainSet.PAGE);
      const end = Math.min(GrainSet.PAGE, count - base);
      if (page === undefined) {
        yield [base, end];
        continue;
      }
      for (let bit = 0; bit < end; ) {
        if (page[bit >> 3]! & (1 << (bit & 7))) {
          bit++;
          continue;
        }
        const first = bit;
        while (bit < end && (page[bit >> 3]! & (1 << (bit & 7))) === 0) bit++;
        yield [base + first, bit - first];
      }
    }
  }
}
