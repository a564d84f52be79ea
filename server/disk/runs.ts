// Shared by the readers: data cut into the writer's pieces (a zero piece is a hole), and zero runs of neighbouring
// ranges merged into one (a sparse table of a large disk is millions of entries).
import { isZeroBlock, XVA_BLOCK_SIZE } from "../xva/format.ts";
import type { DiskRun } from "./image.ts";

/** Runs are handed on in pieces of at most this. */
export const PIECE = XVA_BLOCK_SIZE;

/** `data` for disk offset `offset` as pieces, cut at the disk's `end`; all-zero pieces are zero runs. */
export function* dataRuns(offset: number, data: Buffer, end: number): Generator<DiskRun> {
  const inDisk = Math.min(data.length, end - offset);
  for (let at = 0; at < inDisk; at += PIECE) {
    const piece = data.subarray(at, Math.min(inDisk, at + PIECE));
    yield isZeroBlock(piece) ? { offset: offset + at, zeros: piece.length } : { offset: offset + at, data: piece };
  }
}

/** Zero ranges added in any order; neighbours go out as one run, cut at the disk's `end`. */
export class ZeroRuns {
  readonly #end: number;
  #from = 0;
  #to = 0;

  constructor(end: number) {
    this.#end = end;
  }

  *add(offset: number, length: number): Generator<DiskRun> {
    const end = Math.min(offset + length, this.#end);
    if (end <= offset) return;
    if (offset !== this.#to) yield* this.flush();
    if (this.#to === this.#from) this.#from = offset;
    this.#to = end;
  }

  *flush(): Generator<DiskRun> {
    if (this.#to > this.#from) yield { offset: this.#from, zeros: this.#to - this.#from };
    this.#from = this.#to = 0;
  }
}

/**
 * Runs with data smaller than a piece (64 KiB VMDK grains and qcow2 clusters) that follow each other on the disk,
 * copied together into pieces: one write of 1 MiB to the datapath instead of sixteen (the import of a VMDK of
 * grains wrote at 90 MB/s through 64 KiB NBD writes; the datapath's round trips, not the data, were the cost).
 * `take` gives each piece's buffer (of PIECE bytes): a pool's, to be given back once the piece is written.
 */
export async function* coalesced(runs: AsyncIterable<DiskRun>, take: () => Buffer = () => Buffer.allocUnsafe(PIECE)): AsyncGenerator<DiskRun> {
  let piece: Buffer | undefined;
  let start = 0;
  let length = 0;
  const flush = (): DiskRun => {
    const run = { offset: start, data: piece!.subarray(0, length) };
    piece = undefined;
    length = 0;
    return run;
  };
  for await (const run of runs) {
    if (!("data" in run) || run.data.length >= PIECE) {
      if (piece !== undefined) yield flush();
      yield run;
      continue;
    }
    if (piece !== undefined && (run.offset !== start + length || length + run.data.length > PIECE)) yield flush();
    if (piece === undefined) {
      piece = take();
      start = run.offset;
    }
    run.data.copy(piece, length);
    length += run.data.length;
    if (length === PIECE) yield flush();
  }
  if (piece !== undefined) yield flush();
}
