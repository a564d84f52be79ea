// Sizes and repetitions of the XVA suite. HANGAR_BENCH_SCALE (default 1: the sizes the rows are stated for)
// scales the disks and their data runs alike, so the layout keeps its shape; HANGAR_BENCH_RUNS sets the rounds.
import { GiB, MiB, positiveEnv } from "../measure.ts";

export interface DiskLayout {
  /** Virtual size, bytes (a whole number of periods). */
  size: number;
  /** Length of each data run and of each hole, bytes (whole MiB). */
  run: number;
}

export interface XvaSizes {
  scale: number;
  /** Interleaved rounds of ours and the baseline per row (each a whole transfer). */
  rounds: number;
  /** The disk of the throughput rows: 4 GiB, half of it data. */
  big: DiskLayout;
  /** The smaller disk of the memory row: 1 GiB, half of it data. */
  small: DiskLayout;
}

/** A period is text run, hole, random run, hole: half data, and the data half text, half random. */
export const RUNS_PER_PERIOD = 4;

function layout(size: number, scale: number): DiskLayout {
  const run = Math.max(MiB, Math.round((64 * MiB * scale) / MiB) * MiB);
  const periods = Math.max(1, Math.round((size * scale) / (RUNS_PER_PERIOD * run)));
  return { size: periods * RUNS_PER_PERIOD * run, run };
}

export function xvaSizes(): XvaSizes {
  const scale = positiveEnv("HANGAR_BENCH_SCALE", 1);
  const rounds = Math.max(1, Math.round(positiveEnv("HANGAR_BENCH_RUNS", 1)));
  return { scale, rounds, big: layout(4 * GiB, scale), small: layout(GiB, scale) };
}

/** Bytes of data (not holes) on a disk of this layout. */
export function dataBytes(disk: DiskLayout): number {
  return disk.size / 2;
}
