// What the daemon's NBD server exports: the volume's data (a filesr handle that activation changes swap
// underneath), writable only while the volume is activated read-write on this host, with every write
// also sent to the mirrors and serialised with copy chunks by a range lock.
import type { ExportBackend, Extent } from "../../../nbd/backend.ts";
import { NbdError } from "../../../nbd/client.ts";
import type { VolumeData } from "../../filesr/index.ts";
import { RangeLock } from "./range-lock.ts";
import type { ExtentReader } from "./transfer.ts";

/** How the volume is activated on this host: not at all, read-only, read-write. */
export type Mode = "none" | "ro" | "rw";

/** A receiver of the volume's writes (a mirror). Its methods never throw: it handles its own failures. */
export interface WriteSink {
  write(offset: number, data: Buffer, fua: boolean): Promise<void>;
  zero(offset: number, length: number): Promise<void>;
  /** After a trim: the range now holds whatever `volume` reads there (a trim may or may not drop data). */
  refresh(volume: ExtentReader, offset: number, length: number): Promise<void>;
  flush(): Promise<void>;
}

export class VolumeExport implements ExportBackend {
  #handle: VolumeData;
  #mode: Mode = "none";
  #closed = false;
  readonly #locks = new RangeLock();
  readonly #sinks = new Set<WriteSink>();
  #inflight = 0;
  #drainWaiters: (() => void)[] = [];
  /** Set while the handle is being replaced: requests wait for it. */
  #swap: Promise<void> | null = null;

  constructor(handle: VolumeData) {
    this.#handle = handle;
  }

  get size(): number {
    return this.#handle.size;
  }

  /** Read by the NBD server at each handshake and request: new connections see READ_ONLY when it is true. */
  get readOnly(): boolean {
    return this.#mode !== "rw" || this.#handle.readOnly;
  }

  get mode(): Mode {
    return this.#mode;
  }

  set mode(mode: Mode) {
    this.#mode = mode;
  }

  addSink(sink: WriteSink): void {
    this.#sinks.add(sink);
  }

  removeSink(sink: WriteSink): void {
    this.#sinks.delete(sink);
  }

  read(offset: number, target: Buffer): Promise<void> {
    return this.#use((handle) => handle.read(offset, target));
  }

  blockStatus(offset: number, length: number): Promise<Extent[]> {
    return this.#use((handle) => handle.blockStatus(offset, length));
  }

  write(offset: number, data: Buffer, options: { fua?: boolean } = {}): Promise<void> {
    return this.#mutate(offset, data.length, async (handle, sinks) => {
      await Promise.all([handle.write(offset, data, options), ...sinks.map((sink) => sink.write(offset, data, options.fua ?? false))]);
    });
  }

  writeZeroes(offset: number, length: number, options: { noHole?: boolean; fua?: boolean } = {}): Promise<void> {
    return this.#mutate(offset, length, async (handle, sinks) => {
      await Promise.all([handle.writeZeroes(offset, length, options), ...sinks.map((sink) => sink.zero(offset, length))]);
    });
  }

  trim(offset: number, length: number): Promise<void> {
    return this.#mutate(offset, length, async (handle, sinks) => {
      await handle.trim(offset, length);
      await Promise.all(sinks.map((sink) => sink.refresh(handle, offset, length)));
    });
  }

  flush(): Promise<void> {
    return this.#use(async (handle) => {
      await Promise.all([handle.flush(), ...[...this.#sinks].map((sink) => sink.flush())]);
    });
  }

  /** Runs `body` on the volume holding the range lock: no write to the range can land meanwhile. */
  async withRange<T>(offset: number, length: number, body: (volume: ExtentReader) => Promise<T>): Promise<T> {
    const release = await this.#locks.acquire(offset, length);
    try {
      return await this.#use(body);
    } finally {
      release();
    }
  }

  /**
   * Closes the current handle once requests in flight are done, then opens its replacement; requests wait
   * meanwhile. The old one is closed first so that its writes are flushed before the new one reads the map.
   * When `open` fails, `fallback` provides the handle and the error is rethrown.
   */
  async replaceHandle(open: () => Promise<VolumeData>, fallback: () => Promise<VolumeData>): Promise<void> {
    while (this.#swap !== null) await this.#swap;
    let done!: () => void;
    this.#swap = new Promise<void>((resolve) => (done = resolve));
    try {
      await this.#drained();
      await this.#handle.close();
      try {
        this.#handle = await open();
      } catch (error) {
        this.#handle = await fallback();
        throw error;
      }
    } finally {
      this.#swap = null;
      done();
    }
  }

  async close(): Promise<void> {
    while (this.#swap !== null) await this.#swap;
    this.#closed = true;
    this.#sinks.clear();
    await this.#drained();
    await this.#handle.close();
  }

  async #mutate(offset: number, length: number, body: (handle: VolumeData, sinks: WriteSink[]) => Promise<void>): Promise<void> {
    this.#checkWritable();
    const release = await this.#locks.acquire(offset, length);
    try {
      await this.#use((handle) => {
        // The mode may have changed while this request waited.
        this.#checkWritable();
        return body(handle, [...this.#sinks]);
      });
    } finally {
      release();
    }
  }

  #checkWritable(): void {
    if (this.readOnly) throw new NbdError("EPERM", "the volume is not activated read-write on this host");
  }

  async #use<T>(body: (handle: VolumeData) => Promise<T>): Promise<T> {
    while (this.#swap !== null) await this.#swap;
    if (this.#closed) throw new NbdError("ESHUTDOWN", "the volume is closed");
    this.#inflight++;
    try {
      return await body(this.#handle);
    } finally {
      if (--this.#inflight === 0) for (const wake of this.#drainWaiters.splice(0)) wake();
    }
  }

  #drained(): Promise<void> {
    if (this.#inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }
}
