// Streaming XVA reader (compat-notes §2): ova.xml first, then per disk its data members in counter order, each
// optionally followed by its checksum member. One block is held at a time, until its checksum member (if any)
// has been read and verified. Legacy packages (appliance 0.1, legacy.ts) come through the same entry point:
// their gzipped chunks are gunzipped as they stream and recut into blocks of the same shape.
import { Readable, pipeline } from "node:stream";
import { createGunzip } from "node:zlib";
import { extract as tarExtract, type Extract } from "tar-stream";
import { z } from "zod";
import { CHECKSUM_SUFFIX, XVA_BLOCK_SIZE, blockChecksum, isZeroBlock, type XvaChecksumKind } from "./format.ts";
import { LEGACY_CHUNK_BYTES, isLegacyOvaXml, legacyChunkMember, parseLegacyOvaXml, type LegacyDisk } from "./legacy.ts";
import { parseOvaXml, type OvaXml } from "./ova-xml.ts";

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
  blockBuffers?: { take(size: number): Buffer };
};

const FRESH_BUFFERS = { take: (size: number) => Buffer.allocUnsafe(size) };

const sizesSchema = z.map(z.string(), z.number().int().nonnegative());
const optionsSchema = z.object({
  maxOvaXmlBytes: z.number().int().positive().default(DEFAULT_MAX_OVA_XML_BYTES),
  force: z.boolean().default(false),
  blockBuffers: z.custom<{ take(size: number): Buffer }>((v) => v !== null && typeof v === "object" && typeof (v as { take?: unknown }).take === "function").default(FRESH_BUFFERS),
});

type Entry = Extract extends AsyncIterable<infer T> ? T : never;
type Member = { entry: Entry; name: string };
type Tagged = { disk: string; block: XvaBlockRead };

const MEMBER = /^([^/]+)\/(\d+)(\.xxhash|\.checksum)?$/;
const CHECKSUM_KIND: Record<string, XvaChecksumKind> = { [CHECKSUM_SUFFIX.xxhash]: "xxhash", [CHECKSUM_SUFFIX.sha1]: "sha1" };
/** tar-stream's message when its input ends inside a header or a member. */
const TAR_END_OF_DATA = "Unexpected end of data";


/** A member's name, refused when it could escape a directory it were extracted to; `./` (tar run in a directory) is dropped. */
function memberName(raw: string): string {
  if (raw.startsWith("/")) throw new XvaReadError(`member ${JSON.stringify(raw)}: absolute path`);
  if (raw.split("/").includes("..")) throw new XvaReadError(`member ${JSON.stringify(raw)}: path with ..`);
  return raw.replace(/^(?:\.\/)+/, "");
}

/** A failure of the tar layer as an XvaReadError: an input that stopped early is a truncated archive. */
function tarFailure(error: unknown, where: string): XvaReadError {
  if (error instanceof XvaReadError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (message === TAR_END_OF_DATA) return new XvaReadError(`archive truncated: the stream ended ${where}`);
  return new XvaReadError(`not a readable tar stream: ${message}`);
}

/** Reads an XVA or a legacy package up to the end of ova.xml; the disks follow through `disks()`. */
export async function openXva(source: AsyncIterable<Uint8Array> | Readable, options: XvaReadOptions = {}): Promise<XvaArchive> {
  const { maxOvaXmlBytes, force, blockBuffers } = optionsSchema.parse(options);
  // Debian's xva-img writes V7 headers without the ustar magic.
  // (tar-stream's own types leave the option out.)
  const extract = tarExtract({ allowUnknownFormat: true } as Parameters<typeof tarExtract>[0]);
  const input = source instanceof Readable ? source : Readable.from(source);
  // Bytes in, against where the last member ends: what lies between is the end-of-archive blocks (tar-stream
  // reads zero blocks as "no header" and fails on anything else). A client may end the stream rather than fail
  // it when its connection drops, so a stream that stops at a member boundary is told from a whole archive so.
  let received = 0;
  let membersEnd = 0;
  input.on("data", (chunk: Uint8Array) => (received += chunk.byteLength));
  input.on("error", (error) => extract.destroy(error));
  input.pipe(extract);
  const entries = extract[Symbol.asyncIterator]();
  const close = () => {
    input.destroy();
    extract.destroy();
  };
  let lastName = "ova.xml";

  /**
   * A member's read failing: tar-stream fails the member with a generic "destroyed" when the tar stream below
   * it fails, so the tar stream's own error is asked for (the iterator gives it) to tell a truncation.
   */
  async function memberFailure(error: unknown, name: string): Promise<XvaReadError> {
    if (error instanceof XvaReadError) return error;
    const cause = await entries.next().then(
      () => error,
      (tarError: unknown) => tarError,
    );
    return tarFailure(cause, `inside member ${name}`);
  }

  async function readAll(member: Member, size: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of member.entry as AsyncIterable<Buffer>) chunks.push(chunk);
    } catch (error) {
      throw await memberFailure(error, member.name);
    }
    const data = Buffer.concat(chunks);
    if (data.byteLength !== size) throw new XvaReadError(`member ${member.name}: truncated`);
    return data;
  }

  /** A data member's bytes, in a buffer of `blockBuffers`. */
  async function readBlock(member: Member, size: number): Promise<Buffer> {
    const data = blockBuffers.take(size);
    let filled = 0;
    try {
      for await (const chunk of member.entry as AsyncIterable<Buffer>) {
        if (filled + chunk.byteLength > size) throw new XvaReadError(`member ${member.name}: longer than its header says`);
        chunk.copy(data, filled);
        filled += chunk.byteLength;
      }
    } catch (error) {
      throw await memberFailure(error, member.name);
    }
    if (filled !== size) throw new XvaReadError(`member ${member.name}: truncated`);
    return data;
  }

  async function skip(member: Member): Promise<void> {
    try {
      for await (const chunk of member.entry) void chunk;
    } catch (error) {
      throw await memberFailure(error, member.name);
    }
  }

  /** The next file member, directories skipped (GNU tar adds them when given a directory); null at the end. */
  async function next(): Promise<Member | null> {
    for (;;) {
      let step: IteratorResult<Entry>;
      try {
        step = await entries.next();
      } catch (error) {
        throw tarFailure(error, `inside the tar header after member ${lastName}`);
      }
      if (step.done) return null;
      const entry = step.value;
      // byteOffset (where the member's data starts) is tar-stream's, absent from its types.
      const start = (entry.header as { byteOffset?: number }).byteOffset;
      if (typeof start === "number") membersEnd = start + Math.ceil(entry.header.size / 512) * 512;
      const name = memberName(entry.header.name);
      lastName = name;
      if (entry.header.type === "directory") {
        await skip({ entry, name });
        continue;
      }
      if (entry.header.type !== "file" && entry.header.type !== "contiguous-file") throw new XvaReadError(`member ${JSON.stringify(name)}: a ${entry.header.type}, not a file`);
      return { entry, name };
    }
  }

  /** After next() gave null: the tar end-of-archive blocks must have come, or the stream was cut. */
  function assertEndOfArchive(): void {
    if (received <= membersEnd) throw new XvaReadError(`archive truncated: the stream ended after member ${lastName}, without the tar end-of-archive blocks`);
  }

  let ovaXml: string;
  let kind: XvaArchive["kind"];
  let metadata: OvaXml;
  let legacyDisks: LegacyDisk[] = [];
  try {
    const first = await next();
    if (first === null || first.name !== "ova.xml") throw new XvaReadError(`the first member must be ova.xml, not ${first === null ? "the end of the archive" : JSON.stringify(first.name)}`);
    const size = first.entry.header.size;
    if (size > maxOvaXmlBytes) throw new XvaReadError(`ova.xml is ${size} bytes, more than ${maxOvaXmlBytes}`);
    ovaXml = (await readAll(first, size)).toString("utf8");
    if (isLegacyOvaXml(ovaXml)) {
      kind = "legacy";
      ({ metadata, disks: legacyDisks } = parseLegacyOvaXml(ovaXml));
    } else {
      kind = "xva";
      metadata = parseOvaXml(ovaXml);
    }
  } catch (error) {
    close();
    throw error;
  }

  async function* xvaBlocks(sizes: ReadonlyMap<string, number>): AsyncGenerator<Tagged, void, undefined> {
    const done = new Set<string>();
    let disk: string | null = null;
    let declared = 0;
    let lastCounter = -1; // any member of the disk, keep-alives included
    let lastDataCounter = -1;
    let offsetEnd = 0;
    let blockSize = 0;
    // `full` is the member as it came (what its checksum covers); the block's data may be trimmed of padding.
    let pending: { disk: string; member: string; full: Buffer; block: XvaBlockRead } | null = null;
    const settle = (checksum: XvaChecksumKind | null, mismatch = false): Tagged => {
      const { disk: ref, block } = pending!;
      pending = null;
      return { disk: ref, block: mismatch ? { ...block, checksum, checksumMismatch: true } : { ...block, checksum } };
    };
    // Writers always send the block holding a disk's last byte: without it the disk did not arrive whole.
    const assertWhole = (ended: boolean) => {
      if (disk === null || offsetEnd >= declared) return;
      const what = `disk ${disk} stops at byte ${offsetEnd} of its ${declared} (the block holding its last byte never came)`;
      throw new XvaReadError(ended ? `archive truncated: ${what}` : `${what}: truncated`);
    };

    for (let member = await next(); member !== null; member = await next()) {
      const { entry, name } = member;
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
        const found = (await readAll(member, size)).toString("latin1").trim().toLowerCase();
        const matches = found === blockChecksum(kind, pending.full).toLowerCase();
        if (!matches && !force) throw new XvaChecksumError(dataMember, kind);
        yield settle(kind, !matches);
        continue;
      }

      if (pending !== null) yield settle(null);
      if (ref !== disk) {
        if (done.has(ref)) throw new XvaReadError(`${name}: disk ${ref} appears again after other members`);
        if (!sizes.has(ref)) throw new XvaReadError(`${name}: disk ${ref} has no declared size (not a disk of ova.xml)`);
        assertWhole(false);
        if (disk !== null) done.add(disk);
        disk = ref;
        declared = sizes.get(ref)!;
        lastCounter = lastDataCounter = -1;
        offsetEnd = blockSize = 0;
      }
      if (counter === lastCounter) throw new XvaReadError(`${name}: duplicate block`);
      if (counter < lastCounter) throw new XvaReadError(`${name}: out of order (after block ${lastCounter})`);
      lastCounter = counter;
      if (size > XVA_BLOCK_SIZE) throw new XvaReadError(`${name}: ${size} bytes, more than a 1 MiB block`);
      // Zero-length members are keep-alives sent while a run of zero blocks is skipped: they place nothing.
      if (size === 0) {
        await skip(member);
        continue;
      }
      if (blockSize === 0) blockSize = size;
      const offset = offsetEnd + (counter - lastDataCounter - 1) * blockSize;
      const pastEnd = `${name}: data at bytes ${offset} to ${offset + size} is past the disk's declared size ${declared}`;
      if (offset >= declared) throw new XvaReadError(pastEnd);
      const full = await readBlock(member, size);
      // Xen Orchestra pads a disk's last block to 1 MiB with zeros: those bytes are dropped, any others refused.
      const kept = Math.min(size, declared - offset);
      if (kept < size && !isZeroBlock(full.subarray(kept))) throw new XvaReadError(`${pastEnd} (and not zero padding)`);
      pending = { disk: ref, member: name, full, block: { index: counter, offset, data: kept < size ? full.subarray(0, kept) : full, checksum: null } };
      lastDataCounter = counter;
      offsetEnd = offset + kept;
    }
    if (pending !== null) yield settle(null);
    assertWhole(received <= membersEnd);
    assertEndOfArchive();
  }

  async function* legacyBlocks(): AsyncGenerator<Tagged, void, undefined> {
    const byDir = new Map(legacyDisks.map((disk) => [disk.dir, disk]));
    const done = new Set<string>();
    // The disk being read: gunzipped bytes so far, the next chunk expected, and the block being filled.
    let current = null as { disk: LegacyDisk; written: number; nextChunk: number; shortChunk: string | null; block: Buffer; fill: number } | null;
    const describe = (disk: LegacyDisk) => `vdi ${JSON.stringify(disk.name)} (${disk.ref}, file://${disk.dir})`;

    /** The filled block (or the disk's last, partial one), unless all zeros: the importer leaves holes there. */
    const take = (): Tagged | null => {
      const state = current!;
      const data = state.fill === XVA_BLOCK_SIZE ? state.block : state.block.subarray(0, state.fill);
      const offset = state.written - state.fill;
      state.fill = 0;
      if (isZeroBlock(data)) return null;
      // The yielded buffer belongs to the consumer now.
      state.block = blockBuffers.take(XVA_BLOCK_SIZE);
      return { disk: state.disk.ref, block: { index: offset / XVA_BLOCK_SIZE, offset, data, checksum: null } };
    };
    function* finish(ended: boolean): Generator<Tagged, void, undefined> {
      const state = current!;
      if (state.fill > 0) {
        const last = take();
        if (last !== null) yield last;
      }
      done.add(state.disk.ref);
      if (state.written < state.disk.size) {
        const what = `${describe(state.disk)} holds ${state.written} bytes of its declared ${state.disk.size} (chunks 0 to ${state.nextChunk - 1} came)`;
        throw new XvaReadError(ended ? `archive truncated: ${what}` : `${what}: truncated`);
      }
    }

    for (let member = await next(); member !== null; member = await next()) {
      const { entry, name } = member;
      if (name === "ova.xml") throw new XvaReadError("ova.xml appears twice");
      const chunk = legacyChunkMember(name);
      if (chunk === null) throw new XvaReadError(`unexpected member ${JSON.stringify(name)} (a legacy package holds ova.xml and <dir>/chunk-NNNNNNNNN.gz)`);
      const disk = byDir.get(chunk.dir);
      if (disk === undefined) throw new XvaReadError(`${name}: no vdi of ova.xml has source file://${chunk.dir}`);
      if (current?.disk !== disk) {
        if (done.has(disk.ref)) throw new XvaReadError(`${name}: ${describe(disk)} appears again after other members`);
        if (current !== null) yield* finish(false);
        current = { disk, written: 0, nextChunk: 0, shortChunk: null, block: blockBuffers.take(XVA_BLOCK_SIZE), fill: 0 };
      }
      const state = current;
      // A stream cannot be reordered without holding gigabyte chunks: order is the sender's to get right.
      if (chunk.index === state.nextChunk - 1) throw new XvaReadError(`${name}: chunk ${chunk.index} appears twice`);
      if (chunk.index < state.nextChunk) throw new XvaReadError(`${name}: chunk ${chunk.index} out of order (after chunk ${state.nextChunk - 1})`);
      if (chunk.index > state.nextChunk) throw new XvaReadError(`${name}: chunk ${state.nextChunk} of ${describe(disk)} is missing (or out of order)`);
      if (state.shortChunk !== null) throw new XvaReadError(`${state.shortChunk}: only a disk's last chunk may hold less than ${LEGACY_CHUNK_BYTES} bytes`);
      state.nextChunk++;

      const gunzip = createGunzip({ chunkSize: 64 * 1024 });
      // Errors surface through the iteration below; pipeline tears both streams down on any of them.
      pipeline(Readable.from(entry as AsyncIterable<Buffer>), gunzip, () => undefined);
      let chunkBytes = 0;
      try {
        for await (const piece of gunzip as AsyncIterable<Buffer>) {
          chunkBytes += piece.byteLength;
          if (chunkBytes > LEGACY_CHUNK_BYTES) throw new XvaReadError(`${name}: gunzips to more than ${LEGACY_CHUNK_BYTES} bytes, the size of a chunk`);
          if (state.written + piece.byteLength > disk.size) throw new XvaReadError(`${name}: data at bytes ${state.written} to ${state.written + piece.byteLength} is past the disk's declared size ${disk.size}`);
          for (let used = 0; used < piece.byteLength; ) {
            const n = Math.min(piece.byteLength - used, XVA_BLOCK_SIZE - state.fill);
            piece.copy(state.block, state.fill, used, used + n);
            used += n;
            state.fill += n;
            state.written += n;
            if (state.fill === XVA_BLOCK_SIZE) {
              const block = take();
              if (block !== null) yield block;
            }
          }
        }
      } catch (error) {
        if (error instanceof XvaReadError) throw error;
        const code = (error as NodeJS.ErrnoException).code;
        if (typeof code === "string" && code.startsWith("Z_")) throw new XvaReadError(`${name}: not a valid gzip stream (${(error as Error).message})`);
        throw await memberFailure(error, name);
      }
      if (chunkBytes < LEGACY_CHUNK_BYTES) state.shortChunk = `${name} (${chunkBytes} bytes gunzipped)`;
    }
    const ended = received <= membersEnd;
    if (current !== null) yield* finish(ended);
    for (const disk of legacyDisks) {
      if (done.has(disk.ref) || disk.size === 0) continue;
      const what = `${describe(disk)}: none of its chunks came`;
      throw new XvaReadError(ended ? `archive truncated: ${what}` : what);
    }
    assertEndOfArchive();
  }

  let started = false;
  async function* disks(sizes: ReadonlyMap<string, number>): AsyncGenerator<XvaDiskRead, void, undefined> {
    if (started) throw new XvaReadError("disks() reads the archive once");
    started = true;
    const checked = sizesSchema.parse(sizes);
    const all = kind === "legacy" ? legacyBlocks() : xvaBlocks(checked);
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

  return { kind, ovaXml, metadata, disks, close };
}
