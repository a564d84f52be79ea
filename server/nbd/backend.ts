// What the NBD server serves: anything that can read, write and describe allocation of a byte range.
// Implemented by volumes of a file SR (server/plugins/filesr) and by simple raw files in tests.

/** One extent of a block-status answer; flags use NBD's base:allocation bits. */
export interface Extent {
  length: number;
  /** NBD_STATE_HOLE (1) and/or NBD_STATE_ZERO (2); 0 means allocated data. */
  flags: number;
}

export const STATE_HOLE = 1;
export const STATE_ZERO = 2;

export interface ExportBackend {
  /** Size in bytes, a multiple of 512. */
  readonly size: number;
  readonly readOnly: boolean;
  /**
   * Fills `target` with the bytes at `offset` (target.length bytes, never past size).
   * `target` is only lent: do not touch it after the returned promise settles (the server reuses it).
   */
  read(offset: number, target: Buffer): Promise<void>;
  /** `data` is only lent: copy what must outlive the returned promise (the server reuses the buffer). */
  write(offset: number, data: Buffer, options?: { fua?: boolean }): Promise<void>;
  flush(): Promise<void>;
  /** Discards a range: later reads may return zeros. */
  trim(offset: number, length: number): Promise<void>;
  /** Makes a range read as zeros; `noHole` asks to keep it allocated. */
  writeZeroes(offset: number, length: number, options?: { noHole?: boolean; fua?: boolean }): Promise<void>;
  /** Allocation of [offset, offset+length): extents in order, covering at least one byte. */
  blockStatus(offset: number, length: number): Promise<Extent[]>;
  close(): Promise<void>;
}
