// The shared shape of the SR's small binary files (layer maps, CBT logs): a 32-byte header (8-byte magic,
// u32 BE granularity in bytes, u32 reserved, u64 BE entry count, 8 reserved bytes) and a packed payload
// that is rewritten in place page by page as it changes.
import fs from "node:fs";
import { CLUSTER_SIZE } from "./layout.ts";
import { invalid } from "./errors.ts";

const HEADER_SIZE = 32;
const PAGE_SIZE = 4096;

export function encodePackedFile(magic: string, count: number, payload: Uint8Array): Buffer {
  const buffer = Buffer.alloc(HEADER_SIZE + payload.length);
  buffer.write(magic, 0, "latin1");
  buffer.writeUInt32BE(CLUSTER_SIZE, 8);
  buffer.writeBigUInt64BE(BigInt(count), 16);
  buffer.set(payload, HEADER_SIZE);
  return buffer;
}

/**
 * Creates a new file whose payload is all zero bits, sparse: only the header is written, so its cost does
 * not grow with the disk it describes. Fails if the file exists; leaves none when it cannot be written.
 */
export function createPackedFileSync(file: string, magic: string, count: number, payloadLength: number): void {
  const fd = fs.openSync(file, "wx");
  try {
    fs.writeSync(fd, encodePackedFile(magic, count, new Uint8Array(0)));
    fs.ftruncateSync(fd, HEADER_SIZE + payloadLength);
    fs.fsyncSync(fd);
  } catch (error) {
    fs.rmSync(file, { force: true });
    throw error;
  } finally {
    fs.closeSync(fd);
  }
}

export function decodePackedFile(
  buffer: Buffer,
  magic: string,
  payloadLength: (count: number) => number,
  file: string,
): { count: number; payload: Uint8Array } {
  if (buffer.length < HEADER_SIZE || buffer.toString("latin1", 0, 8) !== magic) {
    throw invalid("file_corrupt", `${file} is not a ${magic} file`);
  }
  if (buffer.readUInt32BE(8) !== CLUSTER_SIZE) throw invalid("file_corrupt", `${file}: unexpected granularity`);
  const count = Number(buffer.readBigUInt64BE(16));
  const length = payloadLength(count);
  if (buffer.length !== HEADER_SIZE + length) throw invalid("file_corrupt", `${file} has the wrong length`);
  return { count, payload: new Uint8Array(buffer.buffer, buffer.byteOffset + HEADER_SIZE, length) };
}

/** Which pages of a payload changed since they were last written out. */
export class DirtyPages {
  private readonly pages = new Set<number>();

  mark(byteIndex: number): void {
    this.pages.add(Math.floor(byteIndex / PAGE_SIZE));
  }

  clear(): void {
    this.pages.clear();
  }

  /** Copies of the changed pages of `payload` with their file positions; forgets them. */
  take(payload: Uint8Array): Array<{ position: number; bytes: Buffer }> {
    const pages = [...this.pages].sort((a, b) => a - b);
    this.pages.clear();
    return pages.map((page) => {
      const start = page * PAGE_SIZE;
      const end = Math.min(start + PAGE_SIZE, payload.length);
      return { position: HEADER_SIZE + start, bytes: Buffer.from(payload.subarray(start, end)) };
    });
  }
}
