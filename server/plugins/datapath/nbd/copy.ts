// Data.copy: the listed blocks of the volume to a remote NBD export. Spans are copied a few at a time, each
// under the volume's range lock (so a mirrored write is never overwritten by older data); the allocation
// is looked up again inside the lock because a write may have filled a hole since the span was chosen.
import { type Extent, STATE_ZERO } from "../../../nbd/backend.ts";
import type { NbdClient } from "../../../nbd/client.ts";
import type { Blocklist } from "../../../storage/types.ts";
import { COPY_WINDOW, copyExtents, type ExtentReader } from "./transfer.ts";

export interface CopySource {
  readonly size: number;
  blockStatus(offset: number, length: number): Promise<Extent[]>;
  withRange<T>(offset: number, length: number, body: (volume: ExtentReader) => Promise<T>): Promise<T>;
}

/** Spans copied at the same time (a span is the unit of the range lock; data spans are one copy window). */
const PARALLEL_SPANS = 4;
/** A hole is zeroed in spans up to this size (one lock, one or few requests). */
const HOLE_SPAN = 256 * 1024 * 1024;

/** The blocklist as sorted, merged byte ranges [start, end) inside a volume of `size` bytes. */
export function byteRanges(blocklist: Blocklist, size: number): Array<[number, number]> {
  const { blocksize } = blocklist;
  if (!(blocksize > 0)) throw new Error(`blocklist blocksize must be positive, got ${blocksize}`);
  const ranges = blocklist.ranges
    .map(([start, length]): [number, number] => {
      if (start < 0 || length < 0) throw new Error(`blocklist range [${start}, ${length}] is negative`);
      return [Math.min(start * blocksize, size), Math.min((start + length) * blocksize, size)];
    })
    .filter(([start, end]) => end > start)
    .sort((a, b) => a[0] - b[0]);
  const merged: Array<[number, number]> = [];
  for (const [start, end] of ranges) {
    const last = merged[merged.length - 1];
    if (last !== undefined && start <= last[1]) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  return merged;
}

export function totalBytes(ranges: ReadonlyArray<[number, number]>): number {
  return ranges.reduce((sum, [start, end]) => sum + end - start, 0);
}

/** Copies the ranges; `onProgress` gets the bytes done so far. Stops (throwing) when `signal` aborts. */
export async function copyRanges(
  source: CopySource,
  target: NbdClient,
  ranges: ReadonlyArray<[number, number]>,
  options: { signal: AbortSignal; onProgress: (done: number) => void },
): Promise<void> {
  const running = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  let done = 0;
  try {
    for (const [start, end] of ranges) {
      for (let at = start; at < end && failure === undefined && !options.signal.aborted; ) {
        const [first] = await source.blockStatus(at, end - at);
        const hole = first !== undefined && first.length > 0 && (first.flags & STATE_ZERO) !== 0;
        const spanEnd = Math.min(end, at + (hole ? Math.min(first.length, HOLE_SPAN) : COPY_WINDOW));
        const spanStart = at;
        const task: Promise<void> = source
          .withRange(spanStart, spanEnd - spanStart, (volume) => copyExtents(volume, target, spanStart, spanEnd - spanStart))
          .then(
            () => {
              done += spanEnd - spanStart;
              options.onProgress(done);
            },
            (error: unknown) => {
              failure ??= { error };
            },
          )
          .finally(() => running.delete(task));
        running.add(task);
        if (running.size >= PARALLEL_SPANS) await Promise.race(running);
        at = spanEnd;
      }
    }
  } finally {
    // Spans in flight finish (or fail) before the copy reports anything.
    await Promise.all(running);
  }
  // A cancel shows as such, not as the failed requests it caused.
  options.signal.throwIfAborted();
  if (failure !== undefined) throw failure.error;
}
