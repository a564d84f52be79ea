// What every format's reader gives: a disk's virtual size, then its content as runs to write at disk offsets,
// in whatever order the file holds them.

/** Bytes to write at `offset`, or `zeros` bytes from `offset` that read as zeros (whatever the target held). */
export type DiskRun = { offset: number; data: Buffer } | { offset: number; zeros: number };

export interface DiskImage {
  format: string;
  virtualSize: number;
  /**
   * A delta: what the image leaves out comes from a parent it names, so it is left as the target holds it;
   * otherwise every byte the runs do not write reads as zeros (they say so with zero runs).
   */
  differencing: boolean;
  runs: AsyncIterable<DiskRun>;
  /** Lets go of what the image holds besides the stream (a file kept aside, a process), read or not. */
  close?(): Promise<void>;
}

/** A malformed image, with the file offset where it was found when there is one. */
export class DiskImageError extends Error {
  readonly offset: number | undefined;

  constructor(message: string, offset?: number) {
    super(offset === undefined ? message : `${message} (at byte ${offset})`);
    this.name = "DiskImageError";
    this.offset = offset;
  }
}
