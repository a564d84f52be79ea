// A legacy package's disk data (legacy.ts): per disk a directory of gzipped chunks, gunzipped as they stream and
// recut into blocks of the shape an XVA's have.
import { Readable, pipeline } from "node:stream";
import { createGunzip } from "node:zlib";
import { XVA_BLOCK_SIZE, isZeroBlock } from "./format.ts";
import { LEGACY_CHUNK_BYTES, legacyChunkMember, type LegacyDisk } from "./legacy.ts";
import { XvaReadError } from "./read-errors.ts";
import type { BlockBuffers, DiskBlock } from "./reader.ts";
import type { Member, TarMembers } from "./tar-members.ts";

/** The disk being read: gunzipped bytes so far, the next chunk expected, and the block being filled. */
type DiskState = { disk: LegacyDisk; written: number; nextChunk: number; shortChunk: string | null; block: Buffer; fill: number };

const describe = (disk: LegacyDisk) => `vdi ${JSON.stringify(disk.name)} (${disk.ref}, file://${disk.dir})`;

/** The members after ova.xml, read once through `read()`. All-zero blocks are left out: the importer leaves holes there. */
export class LegacyBlocks {
  readonly #members: TarMembers;
  readonly #disks: LegacyDisk[];
  readonly #byDir: Map<string, LegacyDisk>;
  readonly #blockBuffers: BlockBuffers;
  /** Disks whose chunks are over. */
  readonly #done = new Set<string>();
  #current: DiskState | null = null;

  constructor(members: TarMembers, disks: LegacyDisk[], blockBuffers: BlockBuffers) {
    this.#members = members;
    this.#disks = disks;
    this.#byDir = new Map(disks.map((disk) => [disk.dir, disk]));
    this.#blockBuffers = blockBuffers;
  }

  async *read(): AsyncGenerator<DiskBlock, void, undefined> {
    for (let member = await this.#members.next(); member !== null; member = await this.#members.next()) {
      const { name } = member;
      if (name === "ova.xml") throw new XvaReadError("ova.xml appears twice");
      const chunk = legacyChunkMember(name);
      if (chunk === null) throw new XvaReadError(`unexpected member ${JSON.stringify(name)} (a legacy package holds ova.xml and <dir>/chunk-NNNNNNNNN.gz)`);
      const disk = this.#byDir.get(chunk.dir);
      if (disk === undefined) throw new XvaReadError(`${name}: no vdi of ova.xml has source file://${chunk.dir}`);
      if (this.#current?.disk !== disk) yield* this.#startDisk(name, disk);
      yield* this.#gunzip(member, this.#nextChunk(name, chunk.index));
    }
    const ended = this.#members.cut;
    if (this.#current !== null) yield* this.#finish(ended);
    for (const disk of this.#disks) {
      if (this.#done.has(disk.ref) || disk.size === 0) continue;
      const what = `${describe(disk)}: none of its chunks came`;
      throw new XvaReadError(ended ? `archive truncated: ${what}` : what);
    }
    this.#members.assertEndOfArchive();
  }

  /** The first chunk of `disk`: the disk before it is over. */
  *#startDisk(name: string, disk: LegacyDisk): Generator<DiskBlock, void, undefined> {
    if (this.#done.has(disk.ref)) throw new XvaReadError(`${name}: ${describe(disk)} appears again after other members`);
    if (this.#current !== null) yield* this.#finish(false);
    this.#current = { disk, written: 0, nextChunk: 0, shortChunk: null, block: this.#blockBuffers.take(XVA_BLOCK_SIZE), fill: 0 };
  }

  /** Chunk `index` of the current disk must come next: its state, counted. */
  #nextChunk(name: string, index: number): DiskState {
    const state = this.#current!;
    // A stream cannot be reordered without holding gigabyte chunks: order is the sender's to get right.
    if (index === state.nextChunk - 1) throw new XvaReadError(`${name}: chunk ${index} appears twice`);
    if (index < state.nextChunk) throw new XvaReadError(`${name}: chunk ${index} out of order (after chunk ${state.nextChunk - 1})`);
    if (index > state.nextChunk) throw new XvaReadError(`${name}: chunk ${state.nextChunk} of ${describe(state.disk)} is missing (or out of order)`);
    if (state.shortChunk !== null) throw new XvaReadError(`${state.shortChunk}: only a disk's last chunk may hold less than ${LEGACY_CHUNK_BYTES} bytes`);
    state.nextChunk++;
    return state;
  }

  /** A chunk member, gunzipped into the disk's blocks: each one filled is yielded. */
  async *#gunzip(member: Member, state: DiskState): AsyncGenerator<DiskBlock, void, undefined> {
    const { name } = member;
    const disk = state.disk;
    const gunzip = createGunzip({ chunkSize: 64 * 1024 });
    // Errors surface through the iteration below; pipeline tears both streams down on any of them.
    pipeline(Readable.from(member.entry as AsyncIterable<Buffer>), gunzip, () => undefined);
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
            const block = this.#take();
            if (block !== null) yield block;
          }
        }
      }
    } catch (error) {
      if (error instanceof XvaReadError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      if (typeof code === "string" && code.startsWith("Z_")) throw new XvaReadError(`${name}: not a valid gzip stream (${(error as Error).message})`);
      throw await this.#members.failure(error, name);
    }
    if (chunkBytes < LEGACY_CHUNK_BYTES) state.shortChunk = `${name} (${chunkBytes} bytes gunzipped)`;
  }

  /** The filled block (or the disk's last, partial one), unless all zeros. */
  #take(): DiskBlock | null {
    const state = this.#current!;
    const data = state.fill === XVA_BLOCK_SIZE ? state.block : state.block.subarray(0, state.fill);
    const offset = state.written - state.fill;
    state.fill = 0;
    if (isZeroBlock(data)) return null;
    // The yielded buffer belongs to the consumer now.
    state.block = this.#blockBuffers.take(XVA_BLOCK_SIZE);
    return { disk: state.disk.ref, block: { index: offset / XVA_BLOCK_SIZE, offset, data, checksum: null } };
  }

  /** The current disk is over: its last block out, and all its bytes must have come. */
  *#finish(ended: boolean): Generator<DiskBlock, void, undefined> {
    const state = this.#current!;
    if (state.fill > 0) {
      const last = this.#take();
      if (last !== null) yield last;
    }
    this.#done.add(state.disk.ref);
    if (state.written < state.disk.size) {
      const what = `${describe(state.disk)} holds ${state.written} bytes of its declared ${state.disk.size} (chunks 0 to ${state.nextChunk - 1} came)`;
      throw new XvaReadError(ended ? `archive truncated: ${what}` : `${what}: truncated`);
    }
  }
}
