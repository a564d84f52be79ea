// VHD (Microsoft's Virtual Hard Disk Image Format Specification 1.0), read as a stream: fixed, dynamic and
// differencing disks. All fields are big-endian. A dynamic disk is a footer copy, a header, the block
// allocation table (BAT), then blocks (a sector bitmap and the block's data) in any order, and the footer;
// the blocks are read in file order and written where the BAT says, as they arrive. A fixed disk is the
// data followed by a footer, so it is streamed as it comes and its footer checked at the end.
import { isZeroBlock, XVA_BLOCK_SIZE } from "../xva/format.ts";
import type { ByteReader } from "./byte-reader.ts";
import { type DiskImage, DiskImageError, type DiskRun } from "./image.ts";

export const SECTOR = 512;
export const FOOTER_COOKIE = "conectix";
export const HEADER_COOKIE = "cxsparse";
export const DISK_TYPE = { fixed: 2, dynamic: 3, differencing: 4 } as const;
const UNALLOCATED = 0xffffffff;
/** xapi's largest VHD (Constants.max_vhd_size); the format's 32-bit sector BAT ends near 2 TiB anyway. */
export const MAX_VHD_SIZE = 2040 * 1024 ** 3;
/** Block sizes accepted: powers of two from 512 KiB (Hyper-V's smallest) to 256 MiB (its largest); 2 MiB is usual. */
const MIN_BLOCK = 512 * 1024;
const MAX_BLOCK = 256 * 1024 * 1024;
/** Runs are handed on in pieces of at most this (the writer's unit; a zero piece is a hole). */
const PIECE = XVA_BLOCK_SIZE;

/** The one's complement of the byte sum, the checksum field counted as zero (footer and header alike). */
export function checksum(structure: Buffer, field: number): number {
  let sum = 0;
  for (let i = 0; i < structure.length; i++) if (i < field || i >= field + 4) sum += structure[i]!;
  return ~sum >>> 0;
}

interface Footer {
  dataOffset: number;
  currentSize: number;
  diskType: number;
}

function u64(buffer: Buffer, at: number, what: string, where: number): number {
  const value = buffer.readBigUInt64BE(at);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) return value === 0xffffffffffffffffn ? Number.MAX_SAFE_INTEGER : fail(`${what} ${value} is out of range`, where + at);
  return Number(value);
}

function fail(message: string, offset?: number): never {
  throw new DiskImageError(message, offset);
}

/** The footer at `at` in the file; undefined when its cookie is not there (a fixed disk's data, at byte 0). */
function parseFooter(footer: Buffer, at: number): Footer | undefined {
  if (footer.toString("latin1", 0, 8) !== FOOTER_COOKIE) return undefined;
  if (footer.readUInt32BE(64) !== checksum(footer, 64)) fail(`bad footer checksum: ${footer.readUInt32BE(64).toString(16)}, the footer sums to ${checksum(footer, 64).toString(16)}`, at + 64);
  const diskType = footer.readUInt32BE(60);
  if (diskType !== DISK_TYPE.fixed && diskType !== DISK_TYPE.dynamic && diskType !== DISK_TYPE.differencing) fail(`disk type ${diskType} is none of fixed (2), dynamic (3), differencing (4)`, at + 60);
  const currentSize = u64(footer, 48, "the virtual size", at);
  if (currentSize === 0 || currentSize % SECTOR !== 0) fail(`virtual size ${currentSize} is not a positive number of 512-byte sectors`, at + 48);
  if (currentSize > MAX_VHD_SIZE) fail(`virtual size ${currentSize} is over the VHD limit of 2040 GiB`, at + 48);
  return { dataOffset: u64(footer, 16, "the header offset", at), currentSize, diskType };
}

/**
 * Opens a VHD arriving on `reader`; `length` is the file's size when the request says it (a fixed disk needs it,
 * a dynamic one is checked against it). Nothing is written before the metadata has been read and checked.
 */
export async function openVhd(reader: ByteReader, length: number | undefined): Promise<DiskImage> {
  const first = await reader.read(SECTOR, "the VHD footer");
  const footer = parseFooter(first, 0);
  if (footer === undefined) {
    if (length === undefined) fail("a fixed VHD (no footer copy at byte 0) needs the request's Content-Length: its footer is at the end");
    return openFixed(reader, first, length);
  }
  if (footer.diskType === DISK_TYPE.fixed) fail("a fixed VHD's footer at byte 0", 0);
  return openDynamic(reader, footer, length);
}

async function openFixed(reader: ByteReader, first: Buffer, length: number): Promise<DiskImage> {
  const size = length - SECTOR;
  if (size <= 0 || size % SECTOR !== 0) fail(`the file's ${length} bytes are no fixed VHD's (data in whole sectors and a 512-byte footer), nor does it begin with a VHD footer`);
  if (size > MAX_VHD_SIZE) fail(`a fixed VHD of ${size} bytes is over the VHD limit of 2040 GiB`);
  async function* runs(): AsyncGenerator<DiskRun> {
    for (let offset = 0; offset < size; ) {
      const pieceLength = Math.min(PIECE, size - offset);
      // The first sector, read to look for a footer, is the disk's first.
      const piece = offset === 0 ? Buffer.concat([first, await reader.read(pieceLength - SECTOR, `the data at disk offset ${SECTOR}`)]) : await reader.read(pieceLength, `the data at disk offset ${offset}`);
      yield isZeroBlock(piece) ? { offset, zeros: piece.length } : { offset, data: piece };
      offset += piece.length;
    }
    const trailer = parseFooter(await reader.read(SECTOR, "the VHD footer"), size);
    if (trailer === undefined) fail("no VHD footer at the end of the file (cookie \"conectix\")", size);
    if (trailer.diskType !== DISK_TYPE.fixed) fail(`the footer at the end says disk type ${trailer.diskType}, not fixed (2), and none is at byte 0`, size + 60);
    if (trailer.currentSize !== size) fail(`the footer's virtual size ${trailer.currentSize} is not the ${size} bytes of data before it`, size + 48);
    if (!(await reader.atEnd())) fail("bytes after the VHD footer", length);
  }
  return { format: "vhd", virtualSize: size, differencing: false, runs: runs() };
}

async function openDynamic(reader: ByteReader, footer: Footer, length: number | undefined): Promise<DiskImage> {
  const differencing = footer.diskType === DISK_TYPE.differencing;
  if (footer.dataOffset === Number.MAX_SAFE_INTEGER || footer.dataOffset < SECTOR || footer.dataOffset % SECTOR !== 0) fail(`header offset ${footer.dataOffset} is not a sector after the footer`, 16);
  await reader.skipTo(footer.dataOffset, "the dynamic disk header");
  const header = await reader.read(1024, "the dynamic disk header");
  const at = footer.dataOffset;
  if (header.toString("latin1", 0, 8) !== HEADER_COOKIE) fail(`no dynamic disk header (cookie "${HEADER_COOKIE}")`, at);
  if (header.readUInt32BE(36) !== checksum(header, 36)) fail(`bad header checksum: ${header.readUInt32BE(36).toString(16)}, the header sums to ${checksum(header, 36).toString(16)}`, at + 36);
  const tableOffset = u64(header, 16, "the BAT offset", at);
  const entries = header.readUInt32BE(28);
  const blockSize = header.readUInt32BE(32);
  if (blockSize < MIN_BLOCK || blockSize > MAX_BLOCK || (blockSize & (blockSize - 1)) !== 0) fail(`block size ${blockSize} is not a power of two from 512 KiB to 256 MiB`, at + 32);
  const blocks = Math.ceil(footer.currentSize / blockSize);
  // Tools may size the BAT for a larger disk than this one, never past the format's largest (4 MiB at 2 MiB blocks).
  if (entries < blocks || entries > Math.ceil(MAX_VHD_SIZE / blockSize)) fail(`${entries} BAT entries for ${blocks} blocks of ${blockSize} bytes`, at + 28);
  const bitmapBytes = Math.ceil(blockSize / SECTOR / 8 / SECTOR) * SECTOR;
  if (tableOffset % SECTOR !== 0) fail(`BAT offset ${tableOffset} is not on a sector`, at + 16);
  await reader.skipTo(tableOffset, "the block allocation table");
  const tableBytes = Math.ceil((entries * 4) / SECTOR) * SECTOR;
  const table = await reader.read(tableBytes, "the block allocation table");
  const tableEnd = tableOffset + tableBytes;
  // The blocks the file holds, in file order, each checked to lie after the BAT, inside the file, and apart.
  const held: Array<{ index: number; start: number }> = [];
  for (let index = 0; index < blocks; index++) {
    const sector = table.readUInt32BE(index * 4);
    if (sector !== UNALLOCATED) held.push({ index, start: sector * SECTOR });
  }
  held.sort((a, b) => a.start - b.start);
  const span = bitmapBytes + blockSize;
  for (const [n, block] of held.entries()) {
    const entryAt = tableOffset + block.index * 4;
    if (block.start < tableEnd) fail(`BAT entry ${block.index} points at byte ${block.start}, inside the metadata before the BAT's end (${tableEnd})`, entryAt);
    if (length !== undefined && block.start + span > length - SECTOR) fail(`BAT entry ${block.index} points at a block ending at byte ${block.start + span}, past the file's data (${length - SECTOR} bytes before its footer)`, entryAt);
    const next = held[n + 1];
    if (next !== undefined && block.start + span > next.start) fail(`BAT entries ${block.index} and ${next.index} point at overlapping blocks (bytes ${block.start} and ${next.start})`, entryAt);
  }
  const virtualSize = footer.currentSize;
  async function* runs(): AsyncGenerator<DiskRun> {
    // What the file leaves out: zeros on a dynamic disk, the parent's on a differencing one.
    // Neighbouring left-out blocks go out as one run: a sparse disk of 2040 GiB has a million of them.
    if (!differencing) {
      const present = new Set(held.map((block) => block.index));
      for (let index = 0; index < blocks; ) {
        if (present.has(index)) {
          index++;
          continue;
        }
        const first = index;
        while (index < blocks && !present.has(index)) index++;
        const offset = first * blockSize;
        yield { offset, zeros: Math.min(index * blockSize, virtualSize) - offset };
      }
    }
    for (const block of held) {
      await reader.skipTo(block.start, `block ${block.index}`);
      const bitmap = await reader.read(bitmapBytes, `the sector bitmap of block ${block.index}`);
      const base = block.index * blockSize;
      const inDisk = Math.min(blockSize, virtualSize - base);
      for (let piece = 0; piece < blockSize; piece += PIECE) {
        const size = Math.min(PIECE, blockSize - piece);
        const data = await reader.read(size, `the data of block ${block.index}`);
        if (piece >= inDisk) continue;
        yield* sectorRuns(data.subarray(0, Math.min(size, inDisk - piece)), bitmap, piece / SECTOR, base + piece, differencing);
      }
    }
    await checkTrailer(reader, footer, length);
  }
  return { format: "vhd", virtualSize, differencing, runs: runs() };
}

/** A piece's runs by its sectors' bits (set: the sector is in the file): absent ones are zeros, or left to the parent. */
function* sectorRuns(data: Buffer, bitmap: Buffer, firstSector: number, offset: number, differencing: boolean): Generator<DiskRun> {
  const sectors = data.length / SECTOR;
  const present = (s: number) => ((bitmap[(firstSector + s) >> 3]! >> (7 - ((firstSector + s) & 7))) & 1) === 1;
  for (let s = 0; s < sectors; ) {
    const here = present(s);
    let end = s + 1;
    while (end < sectors && present(end) === here) end++;
    const slice = data.subarray(s * SECTOR, end * SECTOR);
    const at = offset + s * SECTOR;
    if (here) yield isZeroBlock(slice) ? { offset: at, zeros: slice.length } : { offset: at, data: slice };
    else if (!differencing) yield { offset: at, zeros: slice.length };
    s = end;
  }
}

/** Bytes allowed between the last block and the footer when the file's length is not known. */
const MAX_TRAILING = 64 * 1024 * 1024;

/** The footer at the file's end, which repeats the copy at byte 0 (the file may pad up to it). */
async function checkTrailer(reader: ByteReader, copy: Footer, length: number | undefined): Promise<void> {
  let last: Buffer;
  let at: number;
  if (length !== undefined) {
    await reader.skipTo(length - SECTOR, "the footer at the end");
    at = reader.position;
    last = await reader.read(SECTOR, "the footer at the end");
    if (!(await reader.atEnd())) fail("bytes after the VHD footer", length);
  } else {
    // The end is where the stream ends: the last 512 bytes, within a bounded stretch after the last block.
    const from = reader.position;
    let window = Buffer.alloc(0);
    for (;;) {
      const chunk = await reader.readUpTo(PIECE);
      if (chunk.length === 0) break;
      if (reader.position - from > MAX_TRAILING) fail(`over ${MAX_TRAILING} bytes after the last block before the end`, reader.position);
      window = Buffer.concat([window, chunk]).subarray(-SECTOR);
    }
    at = reader.position - window.length;
    if (window.length < SECTOR) fail("the file ends without the footer after its blocks", reader.position);
    last = window;
  }
  const trailer = parseFooter(last, at);
  if (trailer === undefined) fail('no VHD footer at the end of the file (cookie "conectix")', at);
  if (trailer.diskType !== copy.diskType || trailer.currentSize !== copy.currentSize) fail(`the footer at the end (type ${trailer.diskType}, ${trailer.currentSize} bytes) differs from its copy at byte 0 (type ${copy.diskType}, ${copy.currentSize} bytes)`, at);
}
