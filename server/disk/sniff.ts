// A disk image's format from its first bytes (each format's magic at byte 0, a tar's at 257). A raw disk and
// a fixed VHD have none there: they sniff as undefined.

/** Bytes a caller peeks at to sniff (a tar header's magic ends at 263). */
export const SNIFF_BYTES = 512;

const MAGICS: ReadonlyArray<readonly [format: string, at: number, magic: Buffer]> = [
  ["vhd", 0, Buffer.from("conectix", "latin1")],
  ["qcow2", 0, Buffer.from([0x51, 0x46, 0x49, 0xfb])],
  ["vmdk", 0, Buffer.from("KDMV", "latin1")],
  ["vhdx", 0, Buffer.from("vhdxfile", "latin1")],
  ["tar", 257, Buffer.from("ustar", "latin1")],
  ["gzip", 0, Buffer.from([0x1f, 0x8b])],
  ["zstd", 0, Buffer.from([0x28, 0xb5, 0x2f, 0xfd])],
];

/** The format whose magic `head` starts with, or undefined (raw, a fixed VHD, or something unknown). */
export function sniffFormat(head: Buffer): string | undefined {
  return MAGICS.find(([, at, magic]) => head.length >= at + magic.length && head.subarray(at, at + magic.length).equals(magic))?.[0];
}
