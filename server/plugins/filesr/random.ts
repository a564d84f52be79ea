// Random names and uuids from the kernel's random source. Not node:crypto: loading that module costs every
// plugin call that creates something ~5 ms, a read of /dev/urandom a few microseconds.
import { closeSync, openSync, readSync } from "node:fs";

export function randomBytes(count: number): Buffer {
  const bytes = Buffer.allocUnsafe(count);
  const fd = openSync("/dev/urandom", "r");
  try {
    for (let got = 0; got < count; ) got += readSync(fd, bytes, got, count - got, null);
  } finally {
    closeSync(fd);
  }
  return bytes;
}

/** A version 4 (random) uuid, as crypto.randomUUID makes. */
export function randomUUID(): string {
  const bytes = randomBytes(16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
