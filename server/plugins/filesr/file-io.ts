// Positioned file I/O that finishes what it starts: short reads and writes are continued.
import fs from "node:fs";
import { promisify } from "node:util";

const pread = promisify(fs.read);
const pwrite = promisify(fs.write);
const pwritev = promisify(fs.writev);
export const fdatasync = promisify(fs.fdatasync);
export const closeFd = promisify(fs.close);

/** Reads `length` bytes at `position` into target[offset...]; bytes past the end of the file read as zeros. */
export async function readFull(fd: number, target: Buffer, offset: number, length: number, position: number): Promise<void> {
  let done = 0;
  while (done < length) {
    const { bytesRead } = await pread(fd, target, offset + done, length - done, position + done);
    if (bytesRead === 0) {
      // Past the end of a (damaged or shorter) file: the missing bytes read as zeros.
      target.fill(0, offset + done, offset + length);
      return;
    }
    done += bytesRead;
  }
}

export async function writeFull(fd: number, buffers: Buffer[], position: number): Promise<void> {
  let pending = buffers.filter((buffer) => buffer.length > 0);
  let at = position;
  while (pending.length > 0) {
    const { bytesWritten } =
      pending.length === 1 ? await pwrite(fd, pending[0]!, 0, pending[0]!.length, at) : await pwritev(fd, pending, at);
    at += bytesWritten;
    let skip = bytesWritten;
    const rest: Buffer[] = [];
    for (const buffer of pending) {
      if (skip >= buffer.length) skip -= buffer.length;
      else {
        rest.push(skip > 0 ? buffer.subarray(skip) : buffer);
        skip = 0;
      }
    }
    pending = rest;
  }
}

/** Writes dirty pages at their positions, then syncs the file. */
export async function writePages(fd: number, pages: Array<{ position: number; bytes: Buffer }>): Promise<void> {
  for (const page of pages) await writeFull(fd, [page.bytes], page.position);
  if (pages.length > 0) await fdatasync(fd);
}
