// Streaming XVA reader (compat-notes §2): ova.xml first, then per disk its data members in counter order, each
// optionally followed by its checksum member. One block is held at a time, until its checksum member (if any)
// has been read and verified.
import { Readable } from "node:stream";
import { extract as tarExtract, type Extract } from "tar-stream";
import { z } from "zod";
import { CHECKSUM_SUFFIX, XVA_BLOCK_SIZE, blockChecksum, type XvaChecksumKind } from "./format.ts";

export const DEFAULT_MAX_OVA_XML_BYTES = 16 * 1024 * 1024;

export class XvaReadError extends Error {}

/** A block whose checksum member does not match; `member` names the data member. */
export class XvaChecksumError extends XvaReadError {
  readonly member: string;
  constructor(member: string, kind: XvaChecksumKind) {
    super(`${member}: ${kind} checksum mismatch`);
    this.member = member;
  }
}

export type XvaBlockRead = {
  index: number;
  /** Byte offset in the disk: counter gaps are zero blocks of the first block's size. */
  offset: number;
  data: Buffer;
  /** The checksum member that verified this block; null when the archive carried none for it. */
  checksum: XvaChecksumKind | null;
};

export type XvaDiskRead = { ref: string; blocks: AsyncGenerator<XvaBlockRead, void, undefined> };

export type XvaArchive = {
  ovaXml: string;
  /**
   * The disks in archive order, given each disk's declared size in bytes (from ova.xml's VDI records). Drain or
   * leave a disk's blocks before asking for the next disk; blocks left unread are still checked, then skipped.
   */
  disks(sizes: ReadonlyMap<string, number>): AsyncGenerator<XvaDiskRead, void, undefined>;
  /** Stops reading early (the source is released). */
  close(): void;
};

const sizesSchema = z.map(z.string(), z.number().int().nonnegative());
const optionsSchema = z.object({ maxOvaXmlBytes: z.number().int().positive().default(DEFAULT_MAX_OVA_XML_BYTES) });

type Entry = Extract extends AsyncIterable<infer T> ? T : never;

const MEMBER = /^([^/]+)\/(\d+)(\.xxhash|\.checksum)?$/;
const CHECKSUM_KIND: Record<string, XvaChecksumKind> = { [CHECKSUM_SUFFIX.xxhash]: "xxhash", [CHECKSUM_SUFFIX.sha1]: "sha1" };

/** A member's name, refused when it could escape a directory it were extracted to; `./` (tar run in a directory) is dropped. */
function memberName(raw: string): string {
  if (raw.startsWith("/")) throw new XvaReadError(`member ${JSON.stringify(raw)}: absolute path`);
  if (raw.split("/").includes("..")) throw new XvaReadError(`member ${JSON.stringify(raw)}: path with ..`);
  return raw.replace(/^(?:\.\/)+/, "");
}

async function readAll(entry: Entry, size: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of entry as AsyncIterable<Buffer>) chunks.push(chunk);
  const data = Buffer.concat(chunks);
  if (data.byteLength !== size) throw new XvaReadError(`member ${entry.header.name}: truncated`);
  return data;
}

async function skip(entry: Entry): Promise<void> {
  for await (const chunk of entry) void chunk;
}

/** Reads an XVA up to the end of ova.xml; the disks follow through `disks()`. */
export async function openXva(source: AsyncIterable<Uint8Array> | Readable, options: { maxOvaXmlBytes?: number } = {}): Promise<XvaArchive> {
  const { maxOvaXmlBytes } = optionsSchema.parse(options);
  // Debian's xva-img writes V7 headers without the ustar magic.
  // (tar-stream's own types leave the option out.)
  const extract = tarExtract({ allowUnknownFormat: true } as Parameters<typeof tarExtract>[0]);
  const input = source instanceof Readable ? source : Readable.from(source);
  input.on("error", (error) => extract.destroy(error));
  input.pipe(extract);
  const entries = extract[Symbol.asyncIterator]();
  const close = () => {
    input.destroy();
    extract.destroy();
  };

  /** The next file member, directories skipped (GNU tar adds them when given a directory). */
  async function next(): Promise<{ entry: Entry; name: string } | null> {
    for (;;) {
      let step: IteratorResult<Entry>;
      try {
        step = await entries.next();
      } catch (error) {
        throw new XvaReadError(`not a readable tar stream: ${(error as Error).message}`);
      }
      if (step.done) return null;
      const entry = step.value;
      const name = memberName(entry.header.name);
      if (entry.header.type === "directory") {
        await skip(entry);
        continue;
      }
      if (entry.header.type !== "file" && entry.header.type !== "contiguous-file") throw new XvaReadError(`member ${JSON.stringify(name)}: a ${entry.header.type}, not a file`);
      return { entry, name };
    }
  }

  let ovaXml: string;
  try {
    const first = await next();
    if (first === null || first.name !== "ova.xml") throw new XvaReadError(`the first member must be ova.xml, not ${first === null ? "the end of the archive" : JSON.stringify(first.name)}`);
    const size = first.entry.header.size;
    if (size > maxOvaXmlBytes) throw new XvaReadError(`ova.xml is ${size} bytes, more than ${maxOvaXmlBytes}`);
    ovaXml = (await readAll(first.entry, size)).toString("utf8");
  } catch (error) {
    close();
    throw error;
  }

  async function* blocks(sizes: ReadonlyMap<string, number>): AsyncGenerator<{ disk: string; block: XvaBlockRead }, void, undefined> {
    const done = new Set<string>();
    let disk: string | null = null;
    let lastCounter = -1; // any member of the disk, keep-alives included
    let lastDataCounter = -1;
    let offsetEnd = 0;
    let blockSize = 0;
    let pending: { disk: string; member: string; block: XvaBlockRead } | null = null;
    const settle = (checksum: XvaChecksumKind | null) => {
      const { disk: ref, block } = pending!;
      pending = null;
      return { disk: ref, block: { ...block, checksum } };
    };

    for (let next_ = await next(); next_ !== null; next_ = await next()) {
      const { entry, name } = next_;
      const size = entry.header.size;
      if (name === "ova.xml") throw new XvaReadError("ova.xml appears twice");
      const match = MEMBER.exec(name);
      if (match === null || match[1] === ".") throw new XvaReadError(`unexpected member ${JSON.stringify(name)}`);
      const [, ref, digits, suffix] = match as unknown as [string, string, string, string | undefined];
      const counter = Number(digits);

      if (suffix !== undefined) {
        const kind = CHECKSUM_KIND[suffix]!;
        const dataMember = name.slice(0, -suffix.length);
        if (pending === null || pending.member !== dataMember) throw new XvaReadError(`checksum member ${name} does not follow its data member`);
        if (size > 128) throw new XvaReadError(`checksum member ${name}: ${size} bytes`);
        // Compared as hex, whatever its case or trailing newline: the digest is what matters.
        const found = (await readAll(entry, size)).toString("latin1").trim().toLowerCase();
        if (found !== blockChecksum(kind, pending.block.data).toLowerCase()) throw new XvaChecksumError(dataMember, kind);
        yield settle(kind);
        continue;
      }

      if (pending !== null) yield settle(null);
      if (ref !== disk) {
        if (done.has(ref)) throw new XvaReadError(`${name}: disk ${ref} appears again after other members`);
        if (!sizes.has(ref)) throw new XvaReadError(`${name}: disk ${ref} has no declared size (not a disk of ova.xml)`);
        if (disk !== null) done.add(disk);
        disk = ref;
        lastCounter = lastDataCounter = -1;
        offsetEnd = blockSize = 0;
      }
      if (counter === lastCounter) throw new XvaReadError(`${name}: duplicate block`);
      if (counter < lastCounter) throw new XvaReadError(`${name}: out of order (after block ${lastCounter})`);
      lastCounter = counter;
      if (size > XVA_BLOCK_SIZE) throw new XvaReadError(`${name}: ${size} bytes, more than a 1 MiB block`);
      // Zero-length members are keep-alives sent while a run of zero blocks is skipped: they place nothing.
      if (size === 0) {
        await skip(entry);
        continue;
      }
      if (blockSize === 0) blockSize = size;
      const offset = offsetEnd + (counter - lastDataCounter - 1) * blockSize;
      const declared = sizes.get(ref)!;
      if (offset + size > declared) throw new XvaReadError(`${name}: data at bytes ${offset} to ${offset + size} is past the disk's declared size ${declared}`);
      pending = { disk: ref, member: name, block: { index: counter, offset, data: await readAll(entry, size), checksum: null } };
      lastDataCounter = counter;
      offsetEnd = offset + size;
    }
    if (pending !== null) yield settle(null);
  }

  let started = false;
  async function* disks(sizes: ReadonlyMap<string, number>): AsyncGenerator<XvaDiskRead, void, undefined> {
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
  }

  return { ovaXml, disks, close };
}
