// Sizes and repetitions of the storage suite. HANGAR_BENCH_SCALE (default 1: the sizes the targets are
// stated for) shrinks every data size for quick runs; HANGAR_BENCH_RUNS sets the repetitions.
import { GiB, MiB } from "../measure.ts";

const CLUSTER = 64 * 1024;

function envNumber(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!(value > 0) || !Number.isFinite(value)) throw new Error(`${name} must be a positive number, got ${JSON.stringify(text)}`);
  return value;
}

/** Scaled size, a multiple of `unit` (at least one unit). */
function scaled(bytes: number, scale: number, unit = CLUSTER): number {
  return Math.max(unit, Math.round((bytes * scale) / unit) * unit);
}

export interface StorageSizes {
  scale: number;
  /** Repetitions of each transfer and plugin call (median taken). */
  runs: number;
  /** Repetitions of the exec latency calls. */
  execRuns: number;
  throughputBytes: number;
  copyBytes: number;
  /** Allocated and unallocated stripes alternate in the Data.copy source. */
  copyStripe: number;
  snapshotVolumeBytes: number;
  snapshotFirstBytes: number;
  snapshotMoreBytes: number;
  chainBytes: number;
  volumeCount: number;
}

export function storageSizes(): StorageSizes {
  const scale = envNumber("HANGAR_BENCH_SCALE", 1);
  const runs = Math.round(envNumber("HANGAR_BENCH_RUNS", 5));
  const copyBytes = scaled(2 * GiB, scale, 2 * MiB);
  return {
    scale,
    runs,
    execRuns: Math.max(runs, 10),
    throughputBytes: scaled(GiB, scale, MiB),
    copyBytes,
    // 32 stripes of 64 MiB at full scale; never below one cluster.
    copyStripe: Math.max(CLUSTER, Math.floor(copyBytes / 32 / CLUSTER) * CLUSTER),
    snapshotVolumeBytes: scaled(10 * GiB, scale, MiB),
    snapshotFirstBytes: scaled(GiB, scale, MiB),
    snapshotMoreBytes: scaled(5 * GiB, scale, MiB),
    chainBytes: scaled(GiB, scale, MiB),
    volumeCount: Math.max(10, Math.round(1000 * scale)),
  };
}
