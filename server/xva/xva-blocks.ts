// An XVA's disk data (compat-notes §2): per disk its data members `<ref>/<counter>` in counter order, each
// optionally followed by its checksum member. One block is held at a time, until its checksum member (if any)
// has been read and verified.
import { CHECKSUM_SUFFIX, XVA_BLOCK_SIZE, blockChecksum, isZeroBlock, type XvaChecksumKind } from "./format.ts";
import { XvaChecksumError, XvaReadError } from "./read-errors.ts";
import type { BlockBuffers, DiskBlock, XvaBlockRead } from "./reader.ts";
import type { Member, TarMembers } from "./tar-members.ts";

const MEMBER = /^([^/]+)\/(\d+)(\.xxhash|\.checksum)?$/;
const CHECKSUM_KIND: Record<string, XvaChecksumKind> = { [CHECKSUM_SUFFIX.xxhash]: "xxhash", [CHECKSUM_SUFFIX.sha1]: "sha1" };

/**
 * A disk's declared size, given its ref and the member that starts it; throws XvaReadError for a disk that has
 * none (not a disk of ova.xml, a second disk in a one-disk tar).
 */
export type DeclaredSize = (ref: string, member: string) => number;

/** The members after ova.xml (or a one-disk tar's), read once through `read()`. */
export class XvaBlocks {
  readonly #members: TarMembers;
  readonly #sizeOf: DeclaredSize;
  readonly #force: boolean;
  readonly #blockBuffers: BlockBuffers;
  /** Disks whose members are over. */
  readonly #done = new Set<string>();
  // The disk being read: its declared size, the last counters seen and where its data so far ends.
  #disk: string | null = null;
  #declared = 0;
  #lastCounter = -1; // any member of the disk, keep-alives included
  #lastDataCounter = -1;
  #offsetEnd = 0;
  #blockSize = 0;
  /** The block held for its checksum member. `full` is the member as it came (what its checksum covers); the block's data may be trimmed of padding. */
  #pending: { disk: string; member: string; full: Buffer; block: XvaBlockRead } | null = null;

  /** A delta's blocks (a one-disk tar's): those that differ from a base, 1 MiB each; the last need not come. */
  readonly #delta: boolean;

  constructor(members: TarMembers, sizeOf: DeclaredSize, options: { force: boolean; blockBuffers: BlockBuffers; delta?: boolean }) {
    this.#members = members;
    this.#sizeOf = sizeOf;
    this.#force = options.force;
    this.#blockBuffers = options.blockBuffers;
    this.#delta = options.delta ?? false;
  }

  async *read(): AsyncGenerator<DiskBlock, void, undefined> {
    for (let member = await this.#members.next(); member !== null; member = await this.#members.next()) {
      const { name } = member;
      if (name === "ova.xml") throw new XvaReadError("ova.xml appears twice");
      const match = MEMBER.exec(name);
      if (match === null || match[1] === ".") throw new XvaReadError(`unexpected member ${JSON.stringify(name)}`);
      const [, ref, digits, suffix] = match as unknown as [string, string, string, string | undefined];
      if (suffix !== undefined) {
        yield await this.#checksum(member, suffix);
        continue;
      }
      if (this.#pending !== null) yield this.#settle(null);
      await this.#data(member, ref, Number(digits));
    }
    if (this.#pending !== null) yield this.#settle(null);
    this.#assertWhole(this.#members.cut);
    this.#members.assertEndOfArchive();
  }

  /** A checksum member: verifies the pending block, which it settles. */
  async #checksum(member: Member, suffix: string): Promise<DiskBlock> {
    const { name } = member;
    const size = member.entry.header.size;
    const kind = CHECKSUM_KIND[suffix]!;
    const dataMember = name.slice(0, -suffix.length);
    if (this.#pending === null || this.#pending.member !== dataMember) throw new XvaReadError(`checksum member ${name} does not follow its data member`);
    if (size > 128) throw new XvaReadError(`checksum member ${name}: ${size} bytes`);
    // Compared as hex, whatever its case or trailing newline: the digest is what matters.
    const found = (await this.#members.readAll(member, size)).toString("latin1").trim().toLowerCase();
    const matches = found === blockChecksum(kind, this.#pending.full).toLowerCase();
    if (!matches && !this.#force) throw new XvaChecksumError(dataMember, kind);
    return this.#settle(kind, !matches);
  }

  /** A data member: placed in its disk and held as the pending block (a keep-alive places nothing). */
  async #data(member: Member, ref: string, counter: number): Promise<void> {
    const { name } = member;
    const size = member.entry.header.size;
    if (ref !== this.#disk) this.#startDisk(ref, name);
    if (counter === this.#lastCounter) throw new XvaReadError(`${name}: duplicate block`);
    if (counter < this.#lastCounter) throw new XvaReadError(`${name}: out of order (after block ${this.#lastCounter})`);
    this.#lastCounter = counter;
    if (size > XVA_BLOCK_SIZE) throw new XvaReadError(`${name}: ${size} bytes, more than a 1 MiB block`);
    // Zero-length members are keep-alives sent while a run of zero blocks is skipped: they place nothing.
    if (size === 0) {
      await this.#members.skip(member);
      return;
    }
    if (this.#blockSize === 0) this.#blockSize = this.#delta ? XVA_BLOCK_SIZE : size;
    // Counter gaps are zero blocks of the first block's size.
    const offset = this.#offsetEnd + (counter - this.#lastDataCounter - 1) * this.#blockSize;
    const pastEnd = `${name}: data at bytes ${offset} to ${offset + size} is past the disk's declared size ${this.#declared}`;
    if (offset >= this.#declared) throw new XvaReadError(pastEnd);
    const full = await this.#members.readInto(member, this.#blockBuffers.take(size));
    // Xen Orchestra pads a disk's last block to 1 MiB with zeros: those bytes are dropped, any others refused.
    const kept = Math.min(size, this.#declared - offset);
    if (kept < size && !isZeroBlock(full.subarray(kept))) throw new XvaReadError(`${pastEnd} (and not zero padding)`);
    this.#pending = { disk: ref, member: name, full, block: { index: counter, offset, data: kept < size ? full.subarray(0, kept) : full, checksum: null } };
    this.#lastDataCounter = counter;
    this.#offsetEnd = offset + kept;
  }

  /** The first member of disk `ref`: the disk before it is over, and must have come whole. */
  #startDisk(ref: string, name: string): void {
    if (this.#done.has(ref)) throw new XvaReadError(`${name}: disk ${ref} appears again after other members`);
    const declared = this.#sizeOf(ref, name);
    this.#assertWhole(false);
    if (this.#disk !== null) this.#done.add(this.#disk);
    this.#disk = ref;
    this.#declared = declared;
    this.#lastCounter = this.#lastDataCounter = -1;
    this.#offsetEnd = this.#blockSize = 0;
  }

  /** The pending block, let go with what its checksum member said (`null`: it had none). */
  #settle(checksum: XvaChecksumKind | null, mismatch = false): DiskBlock {
    const { disk, block } = this.#pending!;
    this.#pending = null;
    return { disk, block: mismatch ? { ...block, checksum, checksumMismatch: true } : { ...block, checksum } };
  }

  /** Writers always send the block holding a disk's last byte: without it the disk did not arrive whole. */
  #assertWhole(ended: boolean): void {
    if (this.#disk === null || this.#offsetEnd >= this.#declared || this.#delta) return;
    const what = `disk ${this.#disk} stops at byte ${this.#offsetEnd} of its ${this.#declared} (the block holding its last byte never came)`;
    throw new XvaReadError(ended ? `archive truncated: ${what}` : `${what}: truncated`);
  }
}
