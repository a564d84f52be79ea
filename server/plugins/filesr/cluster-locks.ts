// In-process locks on ranges of clusters: copy-on-write of a cluster must not interleave with another write.

export class ClusterLocks {
  private readonly held: Array<{ first: number; last: number; done: Promise<void> }> = [];

  /** Waits until no held range overlaps clusters first..last, takes it, and returns its release. */
  async acquire(first: number, last: number): Promise<() => void> {
    for (;;) {
      const clash = this.held.find((lock) => lock.first <= last && first <= lock.last);
      if (!clash) break;
      await clash.done;
    }
    let release!: () => void;
    const entry = { first, last, done: new Promise<void>((resolve) => (release = resolve)) };
    this.held.push(entry);
    return () => {
      this.held.splice(this.held.indexOf(entry), 1);
      release();
    };
  }
}
