// qcow2 (QEMU's docs/interop/qcow2.rst), versions 2 and 3, read as a stream in one pass: the header, then the
// L1 table, L2 tables and data clusters in whatever order the file holds them. Each table read maps the clusters
// it names (host offset -> disk offset); a cluster met before the table that maps it is kept aside in a spill
// file until it is mapped, never in memory. Compressed clusters (raw deflate, or zstd) are inflated to exactly one
// cluster; zero and unallocated clusters are zero runs. Backing files, encryption, external data files and
// extended L2 entries are refused in words. All fields are big-endian.
import { constants, inflateRawSync, zstdDecompressSync } from "node:zlib";
import { AnyOrder } from "./any-order.ts";
import type { ByteReader } from "./byte-reader.ts";
import { type DiskImage, DiskImageError, type DiskRun } from "./image.ts";
import { dataRuns, ZeroRuns } from "./runs.ts";

export const MAGIC = 0x514649fb;
const V2_HEADER = 72;
/** qemu's own limits: 32 MiB of L1 table; clusters of 512 bytes to 2 MiB. */
const MAX_L1_ENTRIES = (32 * 1024 * 1024) / 8;
const MIN_CLUSTER_BITS = 9;
const MAX_CLUSTER_BITS = 21;
/** The largest virtual size taken (qemu's QCOW_MAX_SIZE... is larger; 1 PiB keeps every offset exact). */
const MAX_SIZE = 2 ** 50;
/** Clusters mapped by tables read and not yet arrived: past this the file's order cannot be streamed. */
const MAX_PENDING = 1 << 22;
const OFFSET_MASK = 0x00fffffffffffe00n;
const COMPRESSED = 1n << 62n;
const INCOMPATIBLE = { dirty: 1n, corrupt: 2n, externalData: 4n, compressionType: 8n, extendedL2: 16n } as const;

function fail(message: string, offset?: number): never {
  throw new DiskImageError(message, offset);
}

/** What the stream holds at a host offset that the reader wants. */
type Qcow2Target =
  | { kind: "l1"; start: number; length: number; entryAt: number }
  | { kind: "l2"; start: number; index: number; entryAt: number }
  | { kind: "data"; start: number; guest: number; entryAt: number }
  | { kind: "compressed"; start: number; end: number; guest: number; entryAt: number };

/**
 * The length of the zstd frame `data` starts with (RFC 8878 §3.1.1), so that what follows it in the cluster's
 * last sector (padding, the next cluster) is not taken for another frame; the whole buffer when it is cut short.
 */
function zstdFrameLength(data: Buffer): number {
  if (data.length < 6) return data.length;
  const descriptor = data[4]!;
  const singleSegment = (descriptor >> 5) & 1;
  const contentSizeBytes = [singleSegment, 2, 4, 8][descriptor >> 6]!;
  let at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 3]! + contentSizeBytes;
  for (;;) {
    if (at + 3 > data.length) return data.length;
    const block = data.readUIntLE(at, 3);
    const type = (block >> 1) & 3;
    at += 3 + (type === 1 ? 1 : block >>> 3);
    if (block & 1) break;
  }
  return Math.min(data.length, at + ((descriptor >> 2) & 1 ? 4 : 0));
}

interface Header {
  clusterBits: number;
  clusterSize: number;
  virtualSize: number;
  l1Entries: number;
  l1Offset: number;
  compression: "deflate" | "zstd";
}

function u64(buffer: Buffer, at: number, what: string): number {
  const value = buffer.readBigUInt64BE(at);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) fail(`${what} ${value} is out of range`, at);
  return Number(value);
}

async function readHeader(reader: ByteReader): Promise<Header> {
  const fixed = await reader.read(V2_HEADER, "the qcow2 header");
  if (fixed.readUInt32BE(0) !== MAGIC) fail("no qcow2 magic (QFI\\xfb) at byte 0", 0);
  const version = fixed.readUInt32BE(4);
  if (version !== 2 && version !== 3) fail(`qcow2 version ${version}: versions 2 and 3 are read`, 4);
  if (fixed.readBigUInt64BE(8) !== 0n || fixed.readUInt32BE(16) !== 0) fail("the image has a backing file: it is a delta of another image. Import the backing chain flattened (qemu-img convert -O qcow2 the top image, which reads through its backing files)", 8);
  const clusterBits = fixed.readUInt32BE(20);
  if (clusterBits < MIN_CLUSTER_BITS || clusterBits > MAX_CLUSTER_BITS) fail(`cluster_bits ${clusterBits} is outside ${MIN_CLUSTER_BITS}..${MAX_CLUSTER_BITS}`, 20);
  const clusterSize = 2 ** clusterBits;
  const virtualSize = u64(fixed, 24, "the virtual size");
  if (virtualSize > MAX_SIZE) fail(`virtual size ${virtualSize} is over ${MAX_SIZE} bytes`, 24);
  if (fixed.readUInt32BE(32) !== 0) fail(`the image is encrypted (crypt_method ${fixed.readUInt32BE(32)}): decrypt it with qemu-img convert first`, 32);
  const l1Entries = fixed.readUInt32BE(36);
  const entriesPerL2 = clusterSize / 8;
  const needed = Math.ceil(virtualSize / (clusterSize * entriesPerL2));
  if (l1Entries < needed || l1Entries > MAX_L1_ENTRIES) fail(`${l1Entries} L1 entries for a disk that needs ${needed}`, 36);
  const l1Offset = u64(fixed, 40, "the L1 table offset");
  if (needed > 0 && (l1Offset < clusterSize || l1Offset % clusterSize !== 0)) fail(`L1 table offset ${l1Offset} is not a cluster after the header`, 40);
  let compression: Header["compression"] = "deflate";
  if (version === 3) {
    const extra = await reader.read(32, "the qcow2 version 3 header");
    const incompatible = extra.readBigUInt64BE(0);
    if (incompatible & INCOMPATIBLE.corrupt) fail("the image is marked corrupt: repair it with qemu-img check -r all first", 72);
    if (incompatible & INCOMPATIBLE.externalData) fail("the image keeps its data in an external data file, which a stream does not carry", 72);
    if (incompatible & INCOMPATIBLE.extendedL2) fail("the image has extended L2 entries (subclusters): convert it with qemu-img convert -O qcow2 first", 72);
    // The dirty bit says refcounts may be stale: they are not read here.
    const unknown = incompatible & ~(INCOMPATIBLE.dirty | INCOMPATIBLE.compressionType);
    if (unknown !== 0n) fail(`incompatible feature bits 0x${unknown.toString(16)} are unknown here`, 72);
    const headerLength = extra.readUInt32BE(28);
    if (headerLength < 104 || headerLength % 8 !== 0 || headerLength > clusterSize) fail(`header length ${headerLength} is not a multiple of 8 from 104 to the cluster size`, 100);
    if (incompatible & INCOMPATIBLE.compressionType) {
      if (headerLength < 112) fail("the compression type bit is set in a header without the compression type field", 100);
      const type = (await reader.read(1, "the compression type"))[0]!;
      if (type > 1) fail(`compression type ${type} is neither deflate (0) nor zstd (1)`, 104);
      compression = type === 0 ? "deflate" : "zstd";
    }
  }
  return { clusterBits, clusterSize, virtualSize, l1Entries, l1Offset, compression };
}

export interface Qcow2Options {
  /** The file's size when the request says it: every table and cluster must lie inside it. */
  length?: number;
  /** Where clusters met before their table are kept aside (a spill file, removed when the runs end). */
  spillDir: string;
}

/** Opens a qcow2 image arriving on `reader`: the header is read and checked; the rest comes with the runs. */
export async function openQcow2(reader: ByteReader, options: Qcow2Options): Promise<DiskImage> {
  const header = await readHeader(reader);
  return { format: "qcow2", virtualSize: header.virtualSize, differencing: false, runs: qcow2Runs(reader, header, options) };
}

async function* qcow2Runs(reader: ByteReader, header: Header, options: Qcow2Options): AsyncGenerator<DiskRun> {
  const { clusterSize, clusterBits, virtualSize } = header;
  const entriesPerL2 = clusterSize / 8;
  const compressedBits = BigInt(62 - (clusterBits - 8));
  const compressedOffsetMask = (1n << compressedBits) - 1n;
  const file = new AnyOrder<Qcow2Target>(reader, { spillDir: options.spillDir, maxPending: MAX_PENDING });
  file.tablesUnread = 1;
  const zeros = new ZeroRuns(virtualSize);

  const inFile = (start: number, length: number, what: string, entryAt: number) => {
    if (start < clusterSize) fail(`${what} at byte ${start} lies inside the header cluster`, entryAt);
    if (options.length !== undefined && start + length > options.length) fail(`${what} at byte ${start} ends past the file's ${options.length} bytes`, entryAt);
  };
  async function* readL1(table: Buffer, at: number): AsyncGenerator<DiskRun> {
    const span = clusterSize * entriesPerL2;
    for (let index = 0; index * span < virtualSize; index++) {
      // Up to 4 Mi entries: the event loop gets its turn between slices of them.
      if (index % 65_536 === 65_535) await new Promise((resolve) => setImmediate(resolve));
      const entryAt = at + index * 8;
      const offset = Number(table.readBigUInt64BE(index * 8) & OFFSET_MASK);
      if (offset === 0) {
        yield* zeros.add(index * span, span);
        continue;
      }
      if (offset % clusterSize !== 0) fail(`L1 entry ${index} points at byte ${offset}, not a cluster boundary`, entryAt);
      inFile(offset, clusterSize, `the L2 table of L1 entry ${index}`, entryAt);
      file.push({ kind: "l2", start: offset, index, entryAt });
      file.tablesUnread++;
    }
    yield* zeros.flush();
  }
  function* readL2(table: Buffer, l1Index: number, at: number): Generator<DiskRun> {
    for (let i = 0; i < entriesPerL2; i++) {
      const guest = (l1Index * entriesPerL2 + i) * clusterSize;
      if (guest >= virtualSize) break;
      const entryAt = at + i * 8;
      const entry = table.readBigUInt64BE(i * 8);
      if (entry & COMPRESSED) {
        const start = Number(entry & compressedOffsetMask);
        const sectors = Number((entry >> compressedBits) & ((1n << (62n - compressedBits)) - 1n));
        const end = (Math.floor(start / 512) + sectors + 1) * 512;
        inFile(start, 1, `the compressed cluster of disk offset ${guest}`, entryAt);
        if (end - start > 2 * clusterSize + 512) fail(`the compressed cluster of disk offset ${guest} spans ${end - start} bytes, more than a cluster's worth`, entryAt);
        file.push({ kind: "compressed", start, end, guest, entryAt });
        continue;
      }
      const offset = Number(entry & OFFSET_MASK);
      if ((entry & 1n) !== 0n || offset === 0) {
        // A zero cluster (preallocated or not), or one not allocated: zeros, as no backing file is there.
        yield* zeros.add(guest, clusterSize);
        continue;
      }
      if (offset % clusterSize !== 0) fail(`the L2 entry of disk offset ${guest} points at byte ${offset}, not a cluster boundary`, entryAt);
      inFile(offset, clusterSize, `the cluster of disk offset ${guest}`, entryAt);
      file.push({ kind: "data", start: offset, guest, entryAt });
    }
    yield* zeros.flush();
  }
  const inflate = (compressed: Buffer, target: Extract<Qcow2Target, { kind: "compressed" }>): Buffer => {
    let out: Buffer;
    try {
      out = header.compression === "deflate" ? inflateRawSync(compressed, { finishFlush: constants.Z_SYNC_FLUSH, maxOutputLength: clusterSize }) : zstdDecompressSync(compressed.subarray(0, zstdFrameLength(compressed)), { maxOutputLength: clusterSize });
    } catch (error) {
      fail(`the compressed cluster of disk offset ${target.guest} does not inflate to one cluster: ${(error as Error).message}`, target.start);
    }
    if (out.length !== clusterSize) fail(`the compressed cluster of disk offset ${target.guest} inflates to ${out.length} bytes, not its cluster's ${clusterSize}`, target.start);
    return out;
  };
  try {
    if (virtualSize > 0) {
      const l1Bytes = header.l1Entries * 8;
      inFile(header.l1Offset, l1Bytes, "the L1 table", 40);
      file.push({ kind: "l1", start: header.l1Offset, length: l1Bytes, entryAt: 40 });
    }
    for (let target = file.next(); target !== undefined; target = file.next()) {
      switch (target.kind) {
        case "l1": {
          const table = await file.bytes(target.start, target.length, "the L1 table", 40);
          file.tablesUnread--;
          yield* readL1(table, target.start);
          break;
        }
        case "l2": {
          const table = await file.bytes(target.start, clusterSize, `the L2 table of L1 entry ${target.index}`, target.entryAt);
          file.tablesUnread--;
          yield* readL2(table, target.index, target.start);
          break;
        }
        case "data":
          yield* dataRuns(target.guest, await file.bytes(target.start, clusterSize, `the cluster of disk offset ${target.guest}`, target.entryAt), virtualSize);
          break;
        case "compressed": {
          // Compressed clusters pack into shared sectors: its range ends where the next target starts, if inside.
          const next = file.peekStart();
          const end = next !== undefined && next > target.start && next < target.end ? next : target.end;
          const bytes = await file.bytesUpTo(target.start, end, `the compressed cluster of disk offset ${target.guest}`, target.entryAt);
          yield* dataRuns(target.guest, inflate(bytes, target), virtualSize);
          break;
        }
      }
    }
    // What follows the last cluster wanted (refcount blocks, snapshots) is read and passed over.
    await file.finish(options.length);
  } finally {
    await file.close();
  }
}
