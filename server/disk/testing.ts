// Test helpers for disk images: a sample disk the format tests convert with Debian's qemu-img.

const MiB = 1024 * 1024;

/** A 40 MiB raw disk: data in a few places (one of them a single sector), zeros elsewhere. */
export function sampleDisk(): Buffer {
  const raw = Buffer.alloc(40 * MiB);
  for (let i = 0; i < 3 * MiB; i++) raw[i] = (i * 7 + 3) & 0xff;
  raw.fill(0x5a, 17 * MiB + 512, 17 * MiB + 1024);
  for (let i = 37 * MiB; i < 40 * MiB; i++) raw[i] = (i * 13) & 0xff;
  return raw;
}
