// Test helpers: OVAs made as real tools make them, their disks written by Debian's qemu-img, and descriptors
// in VirtualBox's dialect beside the one Hangar writes (VMware's).
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pack } from "tar-stream";
import { collect } from "../toolstack/transfer/testing.ts";
import type { PackageSource } from "./import.ts";

/** `raw` written by qemu-img as `format` (`subformat=streamOptimized` for VMware's); the image's bytes. */
export function qemuImage(dir: string, raw: Buffer, name: string, format: string, options: string[] = []): Buffer {
  const source = join(dir, `${name}.raw`);
  writeFileSync(source, raw);
  const image = join(dir, `${name}.${format}`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, source, image]);
  return readFileSync(image);
}

export const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
export const sha1 = (bytes: Buffer) => createHash("sha1").update(bytes).digest("hex");

/** A tar of `members` in the order given, as tar-stream (Xen Orchestra's OVA writer) packs it. */
export async function tarOf(members: ReadonlyArray<readonly [name: string, bytes: Buffer]>): Promise<Buffer> {
  const archive = pack();
  const bytes = collect(archive as AsyncIterable<Buffer>);
  for (const [name, data] of members) archive.entry({ name, size: data.length, mode: 0o644 }, data);
  archive.finalize();
  return bytes;
}

/** A manifest as VMware writes it (`SHA256(name)= hex`), or as VirtualBox does (`SHA1 (name) = hex`). */
export function manifestOf(members: ReadonlyArray<readonly [string, Buffer]>, style: "vmware" | "virtualbox" = "vmware"): Buffer {
  const lines = members.map(([name, data]) => (style === "vmware" ? `SHA256(${name})= ${sha256(data)}\n` : `SHA1 (${name}) = ${sha1(data)}\n`));
  return Buffer.from(lines.join(""));
}

/** A package source over bytes in memory, read in `piece`-byte chunks. */
export function bufferSource(name: string, bytes: Buffer, options: { rereadable?: boolean; piece?: number } = {}): PackageSource {
  const piece = options.piece ?? 256 * 1024;
  return {
    name,
    length: bytes.length,
    rereadable: options.rereadable ?? true,
    open(start, length) {
      const end = length === undefined ? bytes.length : start + length;
      return Readable.from((function* () {
        for (let at = start; at < end; at += piece) yield bytes.subarray(at, Math.min(end, at + piece));
      })());
    },
  };
}

/**
 * A descriptor as VirtualBox 7 exports one (OVF 1.0: a streamOptimized disk on SATA, a DVD drive on IDE, a NIC,
 * USB and sound, EFI in its vbox:Machine section), naming `disk` of `capacity` bytes.
 */
export function virtualBoxOvf(options: { disk: string; capacity: number }): string {
  const template = readFileSync(new URL("fixtures/virtualbox-7.ovf", import.meta.url), "utf8");
  return template.replaceAll("{{disk}}", options.disk).replaceAll("{{capacity}}", String(options.capacity));
}
