// Files packed as a tar (USTAR; sizes of 8 GiB and more in GNU's base-256, as tar-stream and GNU tar read them)
// without reading them: a Blob of headers and the files themselves, which the browser reads only as it is sent.
// The console packs an OVF dropped with its disks this way and uploads one OVA, descriptor first.

const BLOCK = 512;
/** The largest size the 11 octal digits of a USTAR header hold. */
const OCTAL_MAX = 8 ** 11 - 1;

export interface TarFile {
  name: string;
  size: number;
  /** Seconds since 1970. */
  mtime: number;
}

function writeString(header: Uint8Array, text: string, at: number, length: number): void {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > length) throw new Error(`"${text}" is longer than ${length} bytes`);
  header.set(bytes, at);
}

function writeOctal(header: Uint8Array, value: number, at: number, length: number): void {
  writeString(header, value.toString(8).padStart(length - 1, "0"), at, length - 1);
}

/** The 512-byte USTAR header of a regular file. */
export function tarHeader(file: TarFile): Uint8Array {
  const header = new Uint8Array(BLOCK);
  if (new TextEncoder().encode(file.name).length > 100 || file.name.includes("/")) throw new Error(`${file.name}: a file name longer than 100 bytes, or with a /, cannot go in the package`);
  writeString(header, file.name, 0, 100);
  writeOctal(header, 0o644, 100, 8);
  writeOctal(header, 0, 108, 8);
  writeOctal(header, 0, 116, 8);
  if (file.size <= OCTAL_MAX) writeOctal(header, file.size, 124, 12);
  else {
    // base-256: the first byte's high bit set, the size big-endian in the rest of the field.
    header[124] = 0x80;
    let rest = file.size;
    for (let at = 135; at > 124; at--) {
      header[at] = rest % 256;
      rest = Math.floor(rest / 256);
    }
  }
  writeOctal(header, Math.floor(file.mtime), 136, 12);
  header.fill(0x20, 148, 156);
  header[156] = 0x30;
  writeString(header, "ustar\u0000", 257, 6);
  writeString(header, "00", 263, 2);
  writeString(header, "root", 265, 32);
  writeString(header, "root", 297, 32);
  const sum = header.reduce((total, byte) => total + byte, 0);
  writeString(header, `${sum.toString(8).padStart(6, "0")}\u0000 `, 148, 8);
  return header;
}

/** The parts of a tar of `files` in order: each header, the file, its padding; then the two end blocks. */
export function tarParts<T extends TarFile>(files: readonly T[], body: (file: T) => Blob | Uint8Array): Array<Blob | Uint8Array> {
  const parts: Array<Blob | Uint8Array> = [];
  for (const file of files) {
    parts.push(tarHeader(file), body(file));
    const padding = (BLOCK - (file.size % BLOCK)) % BLOCK;
    if (padding > 0) parts.push(new Uint8Array(padding));
  }
  parts.push(new Uint8Array(2 * BLOCK));
  return parts;
}

/** A tar of the browser's files as one Blob: nothing is read until the Blob is. */
export function tarBlob(files: readonly File[]): Blob {
  const described = files.map((file) => ({ name: file.name, size: file.size, mtime: file.lastModified / 1000, file }));
  return new Blob(tarParts(described, (entry) => entry.file) as BlobPart[]);
}
