// Bytes moved through the console in whole blocks of one fixed pool, and written to a spool file with
// O_DIRECT where they can be: an export downloaded (its toolstack answer) and an upload received (the
// browser's PATCH bodies) both land here. Copying the bytes into the page cache cost this VM 2.7 s of kernel
// time per GiB (each new page faulted in from the host), O_DIRECT 0.06 s; a spool of hundreds of GiB does not
// push the SR's VM disks out of the cache either; and a fixed pool makes no garbage per byte.
import { constants, type FileHandle, open } from "node:fs/promises";

/** A piece of a stream: `buffer[0, length)`; `start` is its offset in the stream. */
export interface Block {
  readonly buffer: Buffer;
  length: number;
  start: number;
}

const WASM_PAGE = 64 * 1024;
/** O_DIRECT writes need file offset, length and memory address aligned to this. */
export const DIRECT_ALIGN = 4096;
/**
 * Writes that cannot be direct (a last block, a spool continued at an odd offset, a filesystem without
 * O_DIRECT) are buffered, flushed every this many bytes so that no pile of dirty pages builds up and the
 * kernel throttles every writer.
 */
const WRITE_BEHIND_BYTES = 64 * 1024 * 1024;

/** The memories `alignedBuffers` made. A Buffer's byteOffset is where it starts in its ArrayBuffer, not where that lies in memory: a Buffer.alloc'd one at offset 0 is not page-aligned, and O_DIRECT I/O from it fails with EINVAL. */
const alignedMemories = new WeakSet<ArrayBufferLike>();

/** `count` buffers of `size` bytes in one WebAssembly memory: page-aligned (a Node Buffer is not), so O_DIRECT can use them when `size` is a multiple of 4 KiB. */
export function alignedBuffers(count: number, size: number): Buffer[] {
  const memory = new WebAssembly.Memory({ initial: Math.ceil((count * size) / WASM_PAGE) });
  alignedMemories.add(memory.buffer);
  return Array.from({ length: count }, (_, index) => Buffer.from(memory.buffer, index * size, size));
}

/**
 * A fixed set of blocks. Given-back blocks are reused oldest first, so the most recent stay readable (see
 * `find`) for as long as possible. The blocks lie in one WebAssembly memory, whose start is page-aligned (a
 * Node Buffer's is not): blocks of a multiple of 4 KiB can then be written with O_DIRECT.
 * Not server/buffer-pool.ts's general pool, which makes buffers on demand and drops what it cannot keep: a spool
 * needs its aligned memory made once, blocks found again by stream offset, reuse held off by socket writes
 * (leases), and writers made to wait for a free block (backpressure).
 */
export class BlockPool {
  readonly blockSize: number;
  private readonly free: Block[];
  private readonly all: Block[];
  private readonly waiters: Array<() => void> = [];
  /** Blocks a socket write still reads from (see `lease`), with how many such writes each has. */
  private readonly leases = new Map<Block, number>();
  /** Given-back blocks waiting for their leases to end before they may be reused. */
  private readonly returned = new Set<Block>();
  constructor(count: number, size: number) {
    this.blockSize = size;
    this.all = alignedBuffers(count, size).map((buffer) => ({ buffer, length: 0, start: -1 }));
    this.free = [...this.all];
  }
  take(): Block | undefined {
    const block = this.free.shift();
    if (block !== undefined) {
      block.length = 0;
      block.start = -1;
    }
    return block;
  }
  /** A free block, waiting for one to be given back when none is. */
  async takeWhenFree(): Promise<Block> {
    for (;;) {
      const block = this.take();
      if (block !== undefined) return block;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }
  /** Gives `block` back for reuse: now, or once the last write reading from it has ended. */
  give(block: Block): void {
    if (this.leases.has(block)) {
      this.returned.add(block);
      return;
    }
    this.free.push(block);
    this.waiters.shift()?.();
  }
  /** Calls `listener` once the next block is given back. */
  onGive(listener: () => void): void {
    this.waiters.push(listener);
  }
  /** The block holding stream offset `position`, while it has not been reused. */
  find(position: number): Block | undefined {
    return this.all.find((block) => block.start >= 0 && position >= block.start && position < block.start + block.length);
  }
  /**
   * Lets a socket write read `block`'s memory in place, with no copy: the block is not reused until the
   * returned release is called (once, when the write has ended). Undefined for a block already free (the next
   * take may reuse it: its bytes may be copied now, not later), and when half the pool is already leased: a
   * stalled client then gets copies and cannot starve the pool.
   */
  lease(block: Block): (() => void) | undefined {
    if (this.free.includes(block)) return undefined;
    if (!this.leases.has(block) && this.leases.size * 2 >= this.all.length) return undefined;
    this.leases.set(block, (this.leases.get(block) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.leases.get(block)! - 1;
      if (left > 0) {
        this.leases.set(block, left);
        return;
      }
      this.leases.delete(block);
      if (this.returned.delete(block)) this.give(block);
    };
  }
}

/** Whether O_DIRECT can read into or write from `buffer`: page-aligned memory, whole pages. */
function directable(buffer: Buffer): boolean {
  return alignedMemories.has(buffer.buffer) && buffer.byteOffset % DIRECT_ALIGN === 0 && buffer.length % DIRECT_ALIGN === 0;
}

/**
 * A spool file open twice: buffered, and with O_DIRECT where the filesystem has it. The direct handle goes at
 * its first EINVAL (a filesystem that takes O_DIRECT opens but not such I/O): buffered from then on.
 */
class DirectFile {
  readonly buffered: FileHandle;
  direct: FileHandle | undefined;
  private constructor(buffered: FileHandle, direct: FileHandle | undefined) {
    this.buffered = buffered;
    this.direct = direct;
  }

  static async open(path: string, bufferedFlags: string, directFlags: number): Promise<DirectFile> {
    const buffered = await open(path, bufferedFlags);
    const direct = await open(path, directFlags | constants.O_DIRECT).catch(() => undefined);
    return new DirectFile(buffered, direct);
  }

  /** A direct read or write failed with `error`: EINVAL drops the direct handle (the caller goes buffered), anything else is thrown. */
  async fallBack(error: unknown): Promise<void> {
    if ((error as NodeJS.ErrnoException).code !== "EINVAL") throw error;
    await this.direct?.close().catch(() => undefined);
    this.direct = undefined;
  }

  async close(): Promise<void> {
    await this.direct?.close().catch(() => undefined);
    await this.buffered.close().catch(() => undefined);
  }
}

/** A spool file written from `position` on: whole aligned blocks with O_DIRECT, the rest buffered. */
export class SpoolWriter {
  position: number;
  private readonly file: DirectFile;
  private dirty = 0;
  private syncing: Promise<void> | undefined;

  private constructor(file: DirectFile, position: number) {
    this.file = file;
    this.position = position;
  }

  /** Opens `path` for writing at `position` (`fresh`: made empty first), with O_DIRECT too where the filesystem has it. */
  static async open(path: string, position: number, options: { fresh: boolean }): Promise<SpoolWriter> {
    return new SpoolWriter(await DirectFile.open(path, options.fresh ? "w" : "r+", constants.O_WRONLY), position);
  }

  /** Writes `chunks` at the position, in one pwritev without copying them together; the rest of a short write goes again, buffered. */
  async write(chunks: Buffer[]): Promise<void> {
    let pending = chunks;
    let left = chunks.reduce((sum, chunk) => sum + chunk.length, 0);
    let direct = this.file.direct !== undefined && this.position % DIRECT_ALIGN === 0 && chunks.every(directable);
    while (left > 0) {
      let bytesWritten: number;
      try {
        ({ bytesWritten } = await (direct ? this.file.direct! : this.file.buffered).writev(pending, this.position));
      } catch (error) {
        if (!direct) throw error;
        await this.file.fallBack(error);
        direct = false;
        continue;
      }
      if (!direct) this.dirty += bytesWritten;
      this.position += bytesWritten;
      left -= bytesWritten;
      if (left > 0) {
        pending = [Buffer.concat(pending).subarray(bytesWritten)];
        direct = false;
      }
    }
    if (this.syncing === undefined && this.dirty >= WRITE_BEHIND_BYTES) {
      this.dirty = 0;
      this.syncing = this.file.buffered
        .datasync()
        .catch(() => undefined)
        .finally(() => (this.syncing = undefined));
    }
  }

  /** Waits for the write-behind flush in flight, if any. */
  async settle(): Promise<void> {
    await this.syncing;
  }

  async close(): Promise<void> {
    await this.syncing;
    await this.file.close();
  }
}

/**
 * A spool read back the way it was written: with O_DIRECT where it can be. Its pages were never in the cache,
 * and a buffered read filling the cache cost this VM more CPU than the rest of an upload's path in the console.
 */
export class SpoolReader {
  private readonly file: DirectFile;
  private constructor(file: DirectFile) {
    this.file = file;
  }

  static async open(path: string): Promise<SpoolReader> {
    return new SpoolReader(await DirectFile.open(path, "r", constants.O_RDONLY));
  }

  /**
   * Up to `max` bytes from `position` (fewer at the end of the file), as a view of `buffer`: an aligned buffer
   * (`alignedBuffers`) of at least `max` + DIRECT_ALIGN bytes, since a direct read starts at the aligned
   * offset before `position` and reads whole pages.
   */
  async read(buffer: Buffer, position: number, max: number): Promise<Buffer> {
    const direct = this.file.direct;
    if (direct !== undefined && directable(buffer)) {
      const skip = position % DIRECT_ALIGN;
      const length = Math.min(buffer.length, Math.ceil((skip + max) / DIRECT_ALIGN) * DIRECT_ALIGN);
      try {
        const { bytesRead } = await direct.read(buffer, 0, length, position - skip);
        return buffer.subarray(skip, Math.max(skip, Math.min(bytesRead, skip + max)));
      } catch (error) {
        await this.file.fallBack(error);
      }
    }
    const { bytesRead } = await this.file.buffered.read(buffer, 0, Math.min(max, buffer.length), position);
    return buffer.subarray(0, bytesRead);
  }

  /** The file's length now. */
  async size(): Promise<number> {
    return (await this.file.buffered.stat()).size;
  }

  async close(): Promise<void> {
    await this.file.close();
  }
}
