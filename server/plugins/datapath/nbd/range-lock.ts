// Byte-range lock of a volume. A copy chunk holds it across its local read and remote write, a mirrored
// write across its local and remote writes: so a copy can never put older data over a mirrored write.
// Fair: a request waits only for the earlier requests that overlap it, so a stream of small writes cannot
// starve a large copy chunk (and no request waits on a later one, so there is no deadlock).

interface Held {
  start: number;
  end: number;
  done: Promise<void>;
}

export class RangeLock {
  readonly #held = new Set<Held>();

  /** Resolves with the release function once every earlier overlapping request has released. */
  async acquire(offset: number, length: number): Promise<() => void> {
    const start = offset;
    const end = offset + Math.max(length, 1);
    const earlier: Promise<void>[] = [];
    for (const other of this.#held) if (other.start < end && start < other.end) earlier.push(other.done);
    let release!: () => void;
    const entry: Held = { start, end, done: new Promise<void>((resolve) => (release = resolve)) };
    this.#held.add(entry);
    await Promise.all(earlier);
    return () => {
      this.#held.delete(entry);
      release();
    };
  }
}
