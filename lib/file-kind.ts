// What a file is, from its first bytes (browser and server alike): a disk image by its format's magic at byte 0,
// a tar by `ustar` at 257 (an XVA when its first member is ova.xml, else an OVA), compressed bytes (an XVA),
// an OVF descriptor (XML). A raw disk and a fixed VHD have no magic there: undefined.

/** Bytes a caller reads to sniff (a tar header's magic ends at 263). */
export const SNIFF_BYTES = 512;

const latin1 = (text: string) => Uint8Array.from(text, (c) => c.charCodeAt(0));

const MAGICS: ReadonlyArray<readonly [format: string, at: number, magic: Uint8Array]> = [
  ["vhd", 0, latin1("conectix")],
  ["qcow2", 0, Uint8Array.of(0x51, 0x46, 0x49, 0xfb)],
  ["vmdk", 0, latin1("KDMV")],
  ["vhdx", 0, latin1("vhdxfile")],
  ["tar", 257, latin1("ustar")],
  ["gzip", 0, Uint8Array.of(0x1f, 0x8b)],
  ["zstd", 0, Uint8Array.of(0x28, 0xb5, 0x2f, 0xfd)],
];

/** The format whose magic `head` starts with, or undefined (raw, a fixed VHD, or something unknown). */
export function sniffFormat(head: Uint8Array): string | undefined {
  return MAGICS.find(([, at, magic]) => head.length >= at + magic.length && magic.every((byte, i) => head[at + i] === byte))?.[0];
}

export type PackageKind = { kind: "ova" } | { kind: "xva" } | { kind: "ovf" } | { kind: "disk"; format: string };

/** A name whose bytes carry no magic but is a disk all the same (a raw disk; a fixed VHD, whose footer is last). */
export const HEADERLESS_DISK_NAME = /\.(raw|img|vhd)$/i;

/** Bytes a caller reads to tell a package apart: a tar's first file may follow directory entries (`tar cf x .`). */
export const PACKAGE_SNIFF_BYTES = 4096;

const TAR_BLOCK = 512;

/**
 * The name of a tar's first file member in `head`: directory entries (`./`, which `tar cf x.ova .` puts first)
 * have no data and are passed over; undefined when `head` ends first or a header is not a tar's.
 */
function firstTarFile(head: Uint8Array): string | undefined {
  const text = (from: number, length: number) => new TextDecoder("latin1").decode(head.subarray(from, from + length)).replace(/\0.*$/s, "");
  for (let at = 0; at + TAR_BLOCK <= head.length; at += TAR_BLOCK) {
    if (!text(at + 257, 5).startsWith("ustar")) return undefined;
    const prefix = text(at + 345, 155);
    const name = `${prefix}${prefix === "" ? "" : "/"}${text(at, 100)}`.replace(/^(?:\.\/)+/, "");
    const type = text(at + 156, 1);
    if (type === "5" || name === "" || name === "." || name.endsWith("/")) continue;
    return name;
  }
  return undefined;
}

/** What the first bytes of a file are (see the file's header); undefined when they do not say. */
export function sniffPackage(head: Uint8Array): PackageKind | undefined {
  const format = sniffFormat(head);
  if (format === "tar") {
    // An XVA starts with ova.xml (a legacy package may put directories before it); its blocks are Ref:N/…
    const name = firstTarFile(head);
    return name === undefined || name === "ova.xml" || name === "ova.xml.gz" || /^Ref:\d+\//.test(name) ? { kind: "xva" } : { kind: "ova" };
  }
  if (format === "gzip" || format === "zstd") return { kind: "xva" };
  if (format !== undefined) return { kind: "disk", format };
  if (/^(?:\uFEFF)?\s*<(?:\?xml|[\w:]*Envelope)/.test(new TextDecoder().decode(head.subarray(0, 200)))) return { kind: "ovf" };
  return undefined;
}
