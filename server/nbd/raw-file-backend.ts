// ExportBackend over a plain raw image file, with positional I/O on one FileHandle.
// Node has no SEEK_DATA/SEEK_HOLE nor fallocate, so allocation is reported as "all data" and zeroing
// either cuts the file's tail off (truncate down and back up leaves a sparse hole) or writes zeros.

import { open, type FileHandle } from "node:fs/promises";
import type { ExportBackend, Extent } from "./backend.ts";

const ZERO_CHUNK = Buffer.alloc(1024 * 1024);

export async function openRawFileBackend(path: string, options: { readOnly: boolean }): Promise<ExportBackend> {
  const file = await open(path, options.readOnly ? "r" : "r+");
  try {
    const stat = await file.stat();
    if (!stat.isFile()) throw new Error(`${path} is not a regular file`);
    return new RawFileBackend(file, stat.size, options.readOnly);
  } catch (error) {
    await file.close();
    throw error;
  }
}

class RawFileBackend implements ExportBackend {
  readonly size: number;
  readonly readOnly: boolean;
  readonly #file: FileHandle;

  constructor(file: FileHandle, size: number, readOnly: boolean) {
    this.#file = file;
    this.size = size;
    this.readOnly = readOnly;
  }

  async read(offset: number, target: Buffer): Promise<void> {
    let done = 0;
    while (done < target.length) {
      const { bytesRead } = await this.#file.read(target, done, target.length - done, offset + done);
      if (bytesRead === 0) {
        // The file is shorter than advertised (e.g. truncated behind our back): that part reads as zeros.
        target.fill(0, done);
        return;
      }
      done += bytesRead;
    }
  }

  async write(offset: number, data: Buffer, options: { fua?: boolean } = {}): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const { bytesWritten } = await this.#file.write(data, done, data.length - done, offset + done);
      if (bytesWritten === 0) throw Object.assign(new Error("write made no progress"), { code: "EIO" });
      done += bytesWritten;
    }
    if (options.fua) await this.#file.datasync();
  }

  flush(): Promise<void> {
    return this.#file.datasync();
  }

  trim(offset: number, length: number): Promise<void> {
    return this.#zero(offset, length, true);
  }

  async writeZeroes(offset: number, length: number, options: { noHole?: boolean; fua?: boolean } = {}): Promise<void> {
    await this.#zero(offset, length, !options.noHole);
    if (options.fua) await this.#file.datasync();
  }

  async blockStatus(_offset: number, length: number): Promise<Extent[]> {
    return [{ length, flags: 0 }];
  }

  close(): Promise<void> {
    return this.#file.close();
  }

  async #zero(offset: number, length: number, mayPunch: boolean): Promise<void> {
    if (mayPunch && offset + length >= this.size) {
      await this.#file.truncate(offset);
      await this.#file.truncate(this.size);
      return;
    }
    for (let at = 0; at < length; at += ZERO_CHUNK.length) {
      await this.write(offset + at, ZERO_CHUNK.subarray(0, Math.min(ZERO_CHUNK.length, length - at)));
    }
  }
}
