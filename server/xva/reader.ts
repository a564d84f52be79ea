// Streaming XVA reader (compat-notes §2): ova.xml first, then per disk its data members in counter order, each
// optionally followed by its checksum member. Legacy packages (appliance 0.1, legacy.ts) come through the same
// entry point. The steps: the tar members (tar-members.ts), ova.xml (here), the disks' blocks (xva-blocks.ts, or
// legacy-blocks.ts for a legacy package's gzipped chunks), and those grouped by disk (here).
import type { Readable } from "node:stream";
import { z } from "zod";
import type { XvaChecksumKind } from "./format.ts";
import { isLegacyOvaXml, parseLegacyOvaXml, type LegacyDisk } from "./legacy.ts";
import { LegacyBlocks } from "./legacy-blocks.ts";
import { parseOvaXml, type OvaXml } from "./ova-xml.ts";
import { XvaReadError } from "./read-errors.ts";
import { TarMembers } from "./tar-members.ts";
import { type DeclaredSize, XvaBlocks } from "./xva-blocks.ts";

export { XvaChecksumError, XvaReadError } from "./read-errors.ts";

/** Beside OVA_XML_LIMITS' 200,000 values: 8 MiB parse in ~2.5 s. */
export const DEFAULT_MAX_OVA_XML_BYTES = 8 * 1024 * 1024;
const MAX_LEGACY_OVA_XML_BYTES = 64 * 1024;

export type XvaBlockRead = {
  index: number;
  /** Byte offset in the disk: counter gaps are zero blocks of the first block's size. */
  offset: number;
  data: Buffer;
  /** The checksum member that verified this block; null when the archive carried none for it (always, in a legacy package). */
  checksum: XvaChecksumKind | null;
  /** Set when the checksum member did not match and `force` let the block through. */
  checksumMismatch?: boolean;
};

export type XvaDiskRead = { ref: string; blocks: AsyncGenerator<XvaBlockRead, void, undefined> };

export type XvaArchive = {
  /** "legacy" for an appliance 0.1 package, whose metadata is synthesized from its `<appliance>`. */
  kind: "xva" | "legacy";
  /** ova.xml as it came. */
  ovaXml: string;
  /** ova.xml parsed (an XVA's) or turned into the objects an XVA would carry (a legacy package's). */
  metadata: OvaXml;
  /**
   * The disks in archive order, given each disk's declared size in bytes (from ova.xml's VDI records). Drain or
   * leave a disk's blocks before asking for the next disk; blocks left unread are still checked, then skipped.
   * A legacy package's disks are its VDIs (ids of `metadata`) and their sizes its own: `sizes` is not consulted.
   * All-zero blocks of a legacy disk are not yielded (holes). Fails with XvaReadError("archive truncated: ...")
   * when the stream ends before the tar end-of-archive blocks or before a disk's last byte.
   */
  disks(sizes: ReadonlyMap<string, number>): AsyncGenerator<XvaDiskRead, void, undefined>;
  /** Stops reading early (the source is released). */
  close(): void;
};

export type XvaReadOptions = {
  maxOvaXmlBytes?: number;
  /** A checksum mismatch does not fail the read: the block comes with `checksumMismatch: true`. */
  force?: boolean;
  /**
   * Where blocks' buffers come from. A consumer that hands each block's buffer back when done with it (an
   * importer, once the block is written) spares the process a fresh 1 MiB allocation per block: that churn
   * makes V8 collect every few MiB. Default: fresh buffers.
   */
  blockBuffers?: BlockBuffers;
};

export type BlockBuffers = { take(size: number): Buffer };

/** A block with the disk it belongs to, as the disks' readers give them in archive order. */
export type DiskBlock = { disk: string; block: XvaBlockRead };

const FRESH_BUFFERS = { take: (size: number) => Buffer.allocUnsafe(size) };

const sizesSchema = z.map(z.string(), z.number().int().nonnegative());
const optionsSchema = z.object({
  maxOvaXmlBytes: z.number().int().positive().default(DEFAULT_MAX_OVA_XML_BYTES),
  force: z.boolean().default(false),
  blockBuffers: z.custom<BlockBuffers>((v) => v !== null && typeof v === "object" && typeof (v as { take?: unknown }).take === "function").default(FRESH_BUFFERS),
});

/** Reads an XVA or a legacy package up to the end of ova.xml; the disks follow through `disks()`. */
export async function openXva(source: AsyncIterable<Uint8Array> | Readable, options: XvaReadOptions = {}): Promise<XvaArchive> {
  const { maxOvaXmlBytes, force, blockBuffers } = optionsSchema.parse(options);
  const members = new TarMembers(source);
  const close = () => members.close();
  let head: OvaXmlMember;
  try {
    head = await readOvaXml(members, maxOvaXmlBytes);
  } catch (error) {
    close();
    throw error;
  }
  const { kind, ovaXml, metadata, legacyDisks } = head;
  const blocks = (sizes: ReadonlyMap<string, number>) =>
    kind === "legacy" ? new LegacyBlocks(members, legacyDisks, blockBuffers).read() : new XvaBlocks(members, declaredIn(sizes), { force, blockBuffers }).read();
  return { kind, ovaXml, metadata, disks: byDisk(blocks, close), close };
}

/** Sizes from ova.xml's VDI records: a disk without one is no disk of ova.xml. */
function declaredIn(sizes: ReadonlyMap<string, number>): DeclaredSize {
  return (ref, member) => {
    const size = sizes.get(ref);
    if (size === undefined) throw new XvaReadError(`${member}: disk ${ref} has no declared size (not a disk of ova.xml)`);
    return size;
  };
}

type OvaXmlMember = Pick<XvaArchive, "kind" | "ovaXml" | "metadata"> & { legacyDisks: LegacyDisk[] };

/** The first member, ova.xml: an XVA's, or a legacy package's with its disks. */
async function readOvaXml(members: TarMembers, maxBytes: number): Promise<OvaXmlMember> {
  const first = await members.next();
  if (first === null || first.name !== "ova.xml") throw new XvaReadError(`the first member must be ova.xml, not ${first === null ? "the end of the archive" : JSON.stringify(first.name)}`);
  const size = first.entry.header.size;
  if (size > maxBytes) throw new XvaReadError(`ova.xml is ${size} bytes, more than ${maxBytes}`);
  const bytes = await members.readAll(first, size);
  const ovaXml = bytes.toString("utf8");
  if (isLegacyOvaXml(ovaXml)) {
    // An appliance of one VM is a few KiB; parsed here, on the event loop, it must stay small.
    if (size > MAX_LEGACY_OVA_XML_BYTES) throw new XvaReadError(`a legacy package's ova.xml is ${size} bytes, more than ${MAX_LEGACY_OVA_XML_BYTES}`);
    const { metadata, disks } = parseLegacyOvaXml(ovaXml);
    return { kind: "legacy", ovaXml, metadata, legacyDisks: disks };
  }
  return { kind: "xva", ovaXml, metadata: await parseOvaXml(bytes), legacyDisks: [] };
}

/** XvaArchive's `disks()`: the blocks `blocks` reads, one group per disk; the archive is closed if not read to its end. */
function byDisk(blocks: (sizes: ReadonlyMap<string, number>) => AsyncGenerator<DiskBlock, void, undefined>, close: () => void): XvaArchive["disks"] {
  let started = false;
  return async function* disks(sizes) {
    if (started) throw new XvaReadError("disks() reads the archive once");
    started = true;
    const all = blocks(sizesSchema.parse(sizes));
    let completed = false;
    try {
      let step = await all.next();
      while (!step.done) {
        const ref = step.value.disk;
        async function* group(): AsyncGenerator<XvaBlockRead, void, undefined> {
          while (!step.done && step.value.disk === ref) {
            yield step.value.block;
            step = await all.next();
          }
        }
        yield { ref, blocks: group() };
        // What the consumer did not read of this disk (the block it stopped at included) is checked and skipped.
        while (!step.done && step.value.disk === ref) step = await all.next();
      }
      completed = true;
    } finally {
      if (!completed) close();
    }
  };
}
