// A disk written out as a dynamic VHD (Microsoft's Virtual Hard Disk Image Format Specification 1.0; big-endian),
// laid out as xapi's vhd-tool writes one: the footer's copy, the dynamic disk header, an empty sector, the BAT at
// byte 2048, then each 2 MiB block the disk needs (its sector bitmap, then its data) in disk order, and the footer.
// The layout comes from the source's block map before the first byte, so the length is known up front and the same
// inputs give the same bytes (an export resumes by byte offset).
// A differencing disk (a delta) names its parent in the header (unique id, time stamp, name) and in parent
// locators after the BAT, as vhd-util writes them; its bitmaps mark only the sectors of carried source blocks, so
// a reader takes the rest of a block from the parent.
import { setImmediate } from "node:timers/promises";
import { CarriedBlocks, carriedMap, type DiskSource, ofLength, SOURCE_BLOCK, sourceBlockLength } from "./source.ts";
import { checksum, DISK_TYPE, FOOTER_COOKIE, HEADER_COOKIE, MAX_VHD_SIZE, SECTOR } from "./vhd.ts";

/** 2 MiB blocks, as xapi and qemu write them: two source blocks each, and a one-sector bitmap (4096 bits). */
const BLOCK = 2 * 1024 * 1024;
const HALVES = BLOCK / SOURCE_BLOCK;
const BITMAP = 512;
const HALF_SECTORS = SOURCE_BLOCK / SECTOR;
const HEADER_OFFSET = SECTOR;
const HEADER_SIZE = 1024;
/** Where xapi puts the BAT: after the header and one empty sector. */
const TABLE_OFFSET = 2048;
const VERSION = 0x00010000;
/**
 * Which program wrote the file: blktap's "tap\0", as XenServer's own VHDs say. Readers trust the stored size of
 * a file from a creator they know (qemu: "tap\0", "win ", "qem2"...); of any other they take the disk's size
 * from the CHS geometry, which rounds it down, and a converted copy loses its tail.
 */
const CREATOR_APP = "tap\0";
const CREATOR_VERSION = 0x00010000;
const CREATOR_HOST_OS = 0x5769326b; // "Wi2k"
/** The spec's "reserved" feature bit, always set. */
const FEATURES = 2;
const NO_OFFSET = 0xffffffffffffffffn;
/** VHD time stamps count seconds from 2000-01-01 00:00 UTC. */
const EPOCH = Date.UTC(2000, 0, 1);
const PLATFORM = { macX: 0x4d616358, w2ku: 0x57326b75, w2ru: 0x57327275 } as const;
const PARENT_NAME_BYTES = 512;
const LOCATORS_AT = 576;
const LOCATOR_SIZE = 24;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A parent's file name, in this file's directory: no separator, no control character. */
const FILE_NAME = /^[^/\\\p{Cc}]+$/u;
/** Handed out for every block of a dynamic disk, and every half not carried: never written to. */
const ALL_PRESENT = Buffer.alloc(BITMAP, 0xff);
const ZERO_HALF = Buffer.alloc(SOURCE_BLOCK);

export interface VhdWriteOptions {
  /** The footer's unique id: a delta exported later names it as its parent's. */
  uuid: string;
  /** The footer's time stamp. */
  timestamp: Date;
  /** For a differencing disk: the parent's unique id (its footer's), its time stamp and its file name. */
  parent?: { uuid: string; name: string; timestamp: Date };
}

/** The VHD of `source`: its exact length, and its bytes as the consumer pulls them. */
export function writeVhd(source: DiskSource, options: VhdWriteOptions): { length: number; bytes: AsyncGenerator<Buffer> } {
  const { virtualSize } = source;
  if (!Number.isSafeInteger(virtualSize) || virtualSize <= 0 || virtualSize % SECTOR !== 0) throw new Error(`a VHD's virtual size must be a positive number of 512-byte sectors, not ${virtualSize}`);
  if (virtualSize > MAX_VHD_SIZE) throw new Error(`a virtual size of ${virtualSize} bytes is over the VHD limit of 2040 GiB (${MAX_VHD_SIZE})`);
  const { parent } = options;
  const footer = vhdFooter(virtualSize, parent === undefined ? DISK_TYPE.dynamic : DISK_TYPE.differencing, uuidBytes(options.uuid), vhdTime(options.timestamp));
  const entries = Math.ceil(virtualSize / BLOCK);
  const tableBytes = Math.ceil((entries * 4) / SECTOR) * SECTOR;
  const locators = parent === undefined ? [] : parentLocators(parent.name);
  const locatorsAt = TABLE_OFFSET + tableBytes;
  const header = vhdHeader(entries, parent, locators, locatorsAt);
  const blocksAt = locators.reduce((at, locator) => at + locator.data.length, locatorsAt);

  // Synchronous, to say the length: one call per source block (2 Mi of them at 2 TiB).
  const map = carriedMap(source);
  const present = (block: number) => map[block * HALVES] === 1 || map[block * HALVES + 1] === 1;
  let blocks = 0;
  for (let block = 0; block < entries; block++) if (present(block)) blocks++;
  const length = blocksAt + blocks * (BITMAP + BLOCK) + SECTOR;

  async function* bytes(): AsyncGenerator<Buffer> {
    const head = Buffer.alloc(TABLE_OFFSET);
    footer.copy(head, 0);
    header.copy(head, HEADER_OFFSET);
    yield head;
    // Every entry unallocated (0xffffffff) but those of the blocks written.
    const table = Buffer.alloc(tableBytes, 0xff);
    let sector = blocksAt / SECTOR;
    for (let block = 0; block < entries; block++) {
      // Up to a million entries: the event loop gets its turn between slices of them.
      if (block % 65_536 === 65_535) await setImmediate();
      if (!present(block)) continue;
      table.writeUInt32BE(sector, block * 4);
      sector += (BITMAP + BLOCK) / SECTOR;
    }
    yield table;
    for (const locator of locators) yield locator.data;
    const carried = new CarriedBlocks(source, map);
    try {
      for (let block = 0; block < entries; block++) {
        if (!present(block)) continue;
        yield parent === undefined ? ALL_PRESENT : sectorBitmap(block, map, virtualSize);
        for (let half = 0; half < HALVES; half++) {
          const index = block * HALVES + half;
          if (map[index] !== 1) {
            // Zeros: on a dynamic disk as the disk reads; on a differencing one unmarked, so read from the parent.
            yield ZERO_HALF;
            continue;
          }
          const data = await carried.take(index);
          yield data.length === SOURCE_BLOCK ? data : Buffer.concat([data, ZERO_HALF.subarray(data.length)]);
        }
      }
      await carried.end();
    } finally {
      await carried.close();
    }
    yield footer;
  }

  return { length, bytes: ofLength(bytes(), length, "VHD") };
}

/** A differencing block's bitmap: the sectors of its carried source blocks that lie inside the disk. */
function sectorBitmap(block: number, map: Uint8Array, virtualSize: number): Buffer {
  const bitmap = Buffer.alloc(BITMAP);
  for (let half = 0; half < HALVES; half++) {
    const index = block * HALVES + half;
    if (map[index] !== 1) continue;
    const sectors = sourceBlockLength(index, virtualSize) / SECTOR;
    const first = half * HALF_SECTORS;
    const whole = Math.floor(sectors / 8);
    bitmap.fill(0xff, first / 8, first / 8 + whole);
    // Bits go from the most significant: a last block whose sectors are not a multiple of 8 ends inside a byte.
    if (sectors % 8 !== 0) bitmap[first / 8 + whole] = (0xff << (8 - (sectors % 8))) & 0xff;
  }
  return bitmap;
}

function vhdFooter(virtualSize: number, diskType: number, uuid: Buffer, timestamp: number): Buffer {
  const footer = Buffer.alloc(SECTOR);
  footer.write(FOOTER_COOKIE, 0, "latin1");
  footer.writeUInt32BE(FEATURES, 8);
  footer.writeUInt32BE(VERSION, 12);
  footer.writeBigUInt64BE(BigInt(HEADER_OFFSET), 16);
  footer.writeUInt32BE(timestamp, 24);
  footer.write(CREATOR_APP, 28, "latin1");
  footer.writeUInt32BE(CREATOR_VERSION, 32);
  footer.writeUInt32BE(CREATOR_HOST_OS, 36);
  footer.writeBigUInt64BE(BigInt(virtualSize), 40);
  footer.writeBigUInt64BE(BigInt(virtualSize), 48);
  footer.writeUInt32BE(geometry(virtualSize), 56);
  footer.writeUInt32BE(diskType, 60);
  uuid.copy(footer, 68);
  footer.writeUInt32BE(checksum(footer, 64), 64);
  return footer;
}

interface Locator {
  code: number;
  /** What it holds: the parent's path, padded to whole sectors. */
  data: Buffer;
  /** The path's own bytes. */
  length: number;
}

function vhdHeader(entries: number, parent: VhdWriteOptions["parent"], locators: Locator[], locatorsAt: number): Buffer {
  const header = Buffer.alloc(HEADER_SIZE);
  header.write(HEADER_COOKIE, 0, "latin1");
  header.writeBigUInt64BE(NO_OFFSET, 8);
  header.writeBigUInt64BE(BigInt(TABLE_OFFSET), 16);
  header.writeUInt32BE(VERSION, 24);
  header.writeUInt32BE(entries, 28);
  header.writeUInt32BE(BLOCK, 32);
  if (parent !== undefined) {
    uuidBytes(parent.uuid).copy(header, 40);
    header.writeUInt32BE(vhdTime(parent.timestamp), 56);
    utf16be(parent.name).copy(header, 64);
    let at = locatorsAt;
    for (const [i, locator] of locators.entries()) {
      const entry = LOCATORS_AT + i * LOCATOR_SIZE;
      header.writeUInt32BE(locator.code, entry);
      // The spec says sectors here; Microsoft's tools (and vhd-util, to match them) write bytes, which every
      // reader takes (a value of 512 or more, a multiple of 512, is bytes).
      header.writeUInt32BE(locator.data.length, entry + 4);
      header.writeUInt32BE(locator.length, entry + 8);
      header.writeBigUInt64BE(BigInt(at), entry + 16);
      at += locator.data.length;
    }
  }
  header.writeUInt32BE(checksum(header, 36), 36);
  return header;
}

/**
 * The parent's path relative to this file, as vhd-util writes it: a file URL in UTF-8 (MacX), and a Windows path
 * in UTF-16LE, both as the absolute (W2ku) and the relative (W2ru) one, since the absolute path is not known here.
 */
function parentLocators(name: string): Locator[] {
  if (!FILE_NAME.test(name)) throw new Error(`parent name ${JSON.stringify(name)} is not a file name (empty, a path separator or a control character)`);
  if (name.length * 2 > PARENT_NAME_BYTES) throw new Error(`parent name ${JSON.stringify(name)} does not fit the header's ${PARENT_NAME_BYTES / 2} UTF-16 units`);
  const windows = Buffer.from(`.\\${name}`, "utf16le");
  const paths: Array<[number, Buffer]> = [
    [PLATFORM.macX, Buffer.from(`file://./${name}`, "utf8")],
    [PLATFORM.w2ku, windows],
    [PLATFORM.w2ru, windows],
  ];
  return paths.map(([code, path]) => {
    const data = Buffer.alloc(Math.ceil(path.length / SECTOR) * SECTOR);
    path.copy(data);
    return { code, data, length: path.length };
  });
}

function utf16be(text: string): Buffer {
  return Buffer.from(text, "utf16le").swap16();
}

function uuidBytes(uuid: string): Buffer {
  if (!UUID.test(uuid)) throw new Error(`"${uuid}" is not a uuid`);
  return Buffer.from(uuid.replaceAll("-", ""), "hex");
}

function vhdTime(date: Date): number {
  const seconds = Math.floor((date.getTime() - EPOCH) / 1000);
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds > 0xffffffff) throw new Error(`time ${Number.isNaN(date.getTime()) ? "(invalid)" : date.toISOString()} is outside what a VHD time stamp holds (2000 to 2136)`);
  return seconds;
}

/** Cylinders, heads and sectors per track, by the spec's algorithm (appendix "CHS Calculation"), packed as the footer holds them. */
export function geometry(virtualSize: number): number {
  const totalSectors = Math.min(virtualSize / SECTOR, 65535 * 16 * 255);
  let sectorsPerTrack: number;
  let heads: number;
  let cylinderTimesHeads: number;
  if (totalSectors >= 65535 * 16 * 63) {
    sectorsPerTrack = 255;
    heads = 16;
    cylinderTimesHeads = Math.floor(totalSectors / sectorsPerTrack);
  } else {
    sectorsPerTrack = 17;
    cylinderTimesHeads = Math.floor(totalSectors / sectorsPerTrack);
    heads = Math.max(4, Math.floor((cylinderTimesHeads + 1023) / 1024));
    if (cylinderTimesHeads >= heads * 1024 || heads > 16) {
      sectorsPerTrack = 31;
      heads = 16;
      cylinderTimesHeads = Math.floor(totalSectors / sectorsPerTrack);
    }
    if (cylinderTimesHeads >= heads * 1024) {
      sectorsPerTrack = 63;
      heads = 16;
      cylinderTimesHeads = Math.floor(totalSectors / sectorsPerTrack);
    }
  }
  const cylinders = Math.floor(cylinderTimesHeads / heads);
  return ((cylinders << 16) | (heads << 8) | sectorsPerTrack) >>> 0;
}
