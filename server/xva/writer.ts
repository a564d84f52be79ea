// Streaming XVA writer: ova.xml, then per disk its 1 MiB data members, each followed by a checksum member when
// asked (compat-notes §2). Without ova.xml it writes xapi's one-disk tar (/export_raw_vdi format=tar). Members go out one at a time and each waits for the tar stream to drain, so memory
// stays at a block or two whatever the disk size.
import { Readable } from "node:stream";
import { pack as tarPack } from "tar-stream";
import { z } from "zod";
import { CHECKSUM_SUFFIX, MAX_BLOCK_INDEX, XVA_BLOCK_SIZE, blockChecksum, blockMemberName, type XvaChecksumKind } from "./format.ts";

export type XvaBlock = { index: number; data: Uint8Array };

export type XvaDiskSource = {
  /** The disk VDI's id in ova.xml, `Ref:<n>`. */
  ref: string;
  /** Blocks in increasing index order; all-zero blocks left out, except the first (index 0) and the last. */
  blocks: AsyncIterable<XvaBlock>;
};

const optionsSchema = z
  .object({
    ovaXml: z.string().nullable(),
    disks: z.array(z.object({ ref: z.string().regex(/^[^/]+$/, "a disk ref is a member name prefix"), blocks: z.custom<AsyncIterable<XvaBlock>>((v) => v !== null && typeof v === "object" && Symbol.asyncIterator in v) })),
    checksum: z.enum(["xxhash", "sha1"]).nullable(),
    delta: z.boolean().default(false),
  })
  .refine((o) => o.ovaXml === null || o.disks.every((disk) => /^Ref:\d+$/.test(disk.ref)), "an XVA's disk ref is Ref:<n>")
  .refine((o) => o.ovaXml === null || !o.delta, "an XVA carries whole disks");

export type XvaWriteOptions = {
  /** null: no ova.xml, one disk (xapi's one-disk tar). */
  ovaXml: string | null;
  disks: readonly XvaDiskSource[];
  /** Checksum member after each data member: xxhash (current importers), sha1 (old importers), or none. */
  checksum: XvaChecksumKind | null;
  /** Blocks of a delta: only those that differ from a base, so the first and last need not come. */
  delta?: boolean;
};

export class XvaWriteError extends Error {}

/** The XVA as a byte stream; a failing block source or a bad block fails the stream. */
export function writeXva(options: XvaWriteOptions): Readable {
  const { ovaXml, disks, checksum, delta } = optionsSchema.parse(options);
  const refs = disks.map((disk) => disk.ref);
  if (new Set(refs).size !== refs.length) throw new XvaWriteError("a disk ref appears twice");
  // A few blocks may wait in the pack: each member then need not wait for the consumer to take the last one.
  const pack = tarPack({ highWaterMark: 4 * XVA_BLOCK_SIZE } as Parameters<typeof tarPack>[0]);

  // Resolves once the member is in the tar stream and the stream has room again (tar-stream's entry callback).
  // The entry's own stream is destroyed with the pack's error when the consumer goes away: the callback
  // reports it, so its error event (which has no other listener) is dropped.
  const member = (name: string, data: Uint8Array) =>
    new Promise<void>((resolve, reject) => {
      const entry = pack.entry({ name, mode: 0o644, mtime: new Date(0), uid: 0, gid: 0, size: data.byteLength }, Buffer.from(data.buffer, data.byteOffset, data.byteLength), (error) =>
        error ? reject(error) : resolve(),
      );
      entry.on("error", () => undefined);
    });

  async function produce() {
    if (ovaXml !== null) await member("ova.xml", Buffer.from(ovaXml, "utf8"));
    // Importers expect disks in string order of their ids.
    for (const disk of [...disks].sort((a, b) => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0))) {
      let previous: XvaBlock | null = null;
      for await (const block of disk.blocks) {
        const where = `${disk.ref} block ${block.index}`;
        if (!Number.isSafeInteger(block.index) || block.index < 0 || block.index > MAX_BLOCK_INDEX) throw new XvaWriteError(`${where}: bad index`);
        if (previous === null && block.index !== 0 && !delta) throw new XvaWriteError(`${where}: the first block (index 0) must be present`);
        if (previous !== null && block.index <= previous.index) throw new XvaWriteError(`${where}: indexes must increase (after ${previous.index})`);
        // Readers place blocks by counter times the first block's size, so only the last block may be short.
        if (previous !== null && previous.data.byteLength !== XVA_BLOCK_SIZE) throw new XvaWriteError(`${disk.ref} block ${previous.index}: only the last block may be shorter than 1 MiB`);
        if (block.data.byteLength === 0 || block.data.byteLength > XVA_BLOCK_SIZE) throw new XvaWriteError(`${where}: ${block.data.byteLength} bytes, expected 1 to ${XVA_BLOCK_SIZE}`);
        const name = blockMemberName(disk.ref, block.index);
        // Summed before the block goes: once in the stream its buffer may be taken up and reused (a pooled read).
        const sum = checksum === null ? null : { name: name + CHECKSUM_SUFFIX[checksum], data: Buffer.from(blockChecksum(checksum, block.data), "ascii") };
        await member(name, block.data);
        if (sum !== null) await member(sum.name, sum.data);
        previous = block;
      }
      if (previous === null && !delta) throw new XvaWriteError(`${disk.ref}: no blocks (the first and last are always sent)`);
    }
    pack.finalize();
  }

  produce().catch((error: unknown) => pack.destroy(error instanceof Error ? error : new Error(String(error))));
  // Counted in bytes, not in chunks: sixteen 1 MiB chunks would otherwise wait here.
  return Readable.from(pack, { objectMode: false, highWaterMark: XVA_BLOCK_SIZE });
}
