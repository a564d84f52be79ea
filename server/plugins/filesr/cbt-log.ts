// A changed-block log: one bit per CLUSTER_SIZE block of the disk, most significant bit first (the order of
// the interface's `changed_blocks` bitmap), after the header of packed-file.ts (magic "HGRCBT01").
// A volume with CBT enabled writes to its current log; a snapshot freezes that log and the volume starts a
// new one whose parent it is, so "changed since snapshot S" is the OR of the logs newer than S's.
import fs from "node:fs";
import path from "node:path";
import { fsyncDirSync, replaceFileSync } from "./durable.ts";
import { cbtLogFile, clusterCount, newToken } from "./layout.ts";
import { createPackedFileSync, decodePackedFile, DirtyPages, encodePackedFile } from "./packed-file.ts";
import { statement, type CbtLogRow, type SrConnection } from "./db.ts";

const MAGIC = "HGRCBT01";
const payloadLength = (count: number) => Math.ceil(count / 8);

export class CbtBitmap {
  readonly count: number;
  readonly bits: Uint8Array;
  readonly dirty = new DirtyPages();

  constructor(count: number, bits?: Uint8Array) {
    this.count = count;
    this.bits = bits ?? new Uint8Array(payloadLength(count));
  }

  get(block: number): boolean {
    return (this.bits[block >> 3]! & (0x80 >> (block & 7))) !== 0;
  }

  /** Marks blocks first..last (inclusive). */
  setRange(first: number, last: number): void {
    for (let block = first; block <= last && block < this.count; block++) {
      const index = block >> 3;
      const bit = 0x80 >> (block & 7);
      if ((this.bits[index]! & bit) === 0) {
        this.bits[index] = this.bits[index]! | bit;
        this.dirty.mark(index);
      }
    }
  }

  /** A copy covering `count` blocks; the added blocks count as changed (the disk grew there). */
  grown(count: number): CbtBitmap {
    const bigger = new CbtBitmap(Math.max(count, this.count));
    bigger.bits.set(this.bits);
    bigger.setRange(this.count, bigger.count - 1);
    bigger.dirty.clear();
    return bigger;
  }

  toBuffer(): Buffer {
    return encodePackedFile(MAGIC, this.count, this.bits);
  }
}

export function readCbtSync(file: string): CbtBitmap {
  const { count, payload } = decodePackedFile(fs.readFileSync(file), MAGIC, payloadLength, file);
  return new CbtBitmap(count, payload);
}

export function writeCbtSync(file: string, bitmap: CbtBitmap): void {
  replaceFileSync(file, bitmap.toBuffer());
}

/** Creates an empty log (file inside the caller's transaction) for a disk of `size` bytes. */
export function insertCbtLog(conn: SrConnection, parent: number | null, size: number): number {
  const token = newToken();
  const count = clusterCount(size);
  const file = cbtLogFile(conn.path, token);
  createPackedFileSync(file, MAGIC, count, payloadLength(count));
  fsyncDirSync(path.dirname(file));
  const result = statement(conn, "INSERT INTO cbt_logs (token, parent, size, state) VALUES (?, ?, ?, 'clean')").run(
    token,
    parent,
    size,
  );
  return Number(result.lastInsertRowid);
}

export function requireCbtLog(conn: SrConnection, id: number): CbtLogRow {
  return statement(conn, "SELECT * FROM cbt_logs WHERE id = ?").get(id) as unknown as CbtLogRow;
}
