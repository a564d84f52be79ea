// File operations whose effect survives a crash: fsync before rename, fsync the directory after.
import fs from "node:fs";
import path from "node:path";
import { randomBytes } from "./random.ts";

export function fsyncDirSync(dir: string): void {
  const fd = fs.openSync(dir, "r");
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Atomically replaces `file` with `data`: readers see the old or the new content, never a mix.
 * `durable: false` skips the fsyncs for files whose loss after a power cut does not matter.
 */
export function replaceFileSync(file: string, data: Uint8Array, options: { durable?: boolean } = {}): void {
  const durable = options.durable ?? true;
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  const fd = fs.openSync(tmp, "wx");
  try {
    fs.writeSync(fd, data);
    if (durable) fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  if (durable) fsyncDirSync(path.dirname(file));
}

/** Creates a new, empty sparse file of `size` bytes (fails if the file exists; leaves none when the size is refused). */
export function createSparseFileSync(file: string, size: number): void {
  truncateDurablySync(file, "wx", size);
}

/** Sets the size of an existing file durably (a sparse extension when it grows). */
export function resizeFileSync(file: string, size: number): void {
  truncateDurablySync(file, "r+", size);
}

function truncateDurablySync(file: string, flags: "wx" | "r+", size: number): void {
  const fd = fs.openSync(file, flags);
  try {
    fs.ftruncateSync(fd, size);
    fs.fsyncSync(fd);
  } catch (error) {
    // A size the filesystem refuses (EFBIG, ENOSPC) would leave the empty file open() made.
    if (flags === "wx") fs.rmSync(file, { force: true });
    throw error;
  } finally {
    fs.closeSync(fd);
  }
}

export function isTemporaryFile(name: string): boolean {
  return name.includes(".tmp-");
}

export function removeFilesSync(files: string[]): void {
  for (const file of files) fs.rmSync(file, { force: true });
}
