// Timing and summarising repeated measurements. Runs of the contenders are interleaved by the callers so
// that load from other work on the machine hits all of them alike; the median then ignores outliers.

export interface Samples {
  values: number[];
  median: number;
  min: number;
  max: number;
}

export function summarise(values: number[]): Samples {
  if (values.length === 0) throw new Error("no samples");
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { values, median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** Seconds taken by `work`. */
export async function timeSeconds(work: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/**
 * Runs every contender once per round, `rounds` times, in turn; returns their samples by name.
 * `measure` returns one sample (whatever unit the caller wants).
 */
export async function interleave<K extends string>(
  rounds: number,
  contenders: readonly K[],
  measure: (contender: K, round: number) => Promise<number>,
): Promise<Record<K, Samples>> {
  const collected = new Map<K, number[]>(contenders.map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const name of contenders) collected.get(name)!.push(await measure(name, round));
  }
  return Object.fromEntries(contenders.map((name) => [name, summarise(collected.get(name)!)])) as Record<K, Samples>;
}

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

/** "1.5 GiB", "64 MiB": sizes as the rows name them. */
export function formatSize(bytes: number): string {
  if (bytes >= GiB && bytes % (GiB / 4) === 0) return `${bytes / GiB} GiB`;
  if (bytes < MiB) return `${Math.round(bytes / 1024)} KiB`;
  return `${Math.round((bytes / MiB) * 10) / 10} MiB`;
}

/** Seconds of CPU per GiB moved (the median of `values`, each over `bytes`), as the notes print them. */
export function perGiB(values: number[], bytes: number): string {
  return (summarise(values).median / (bytes / GiB)).toFixed(1);
}

/** Throughput in MB/s (10^6 bytes per second, as nbdcopy and dd print it). */
export function megabytesPerSecond(bytes: number, seconds: number): number {
  return bytes / 1e6 / seconds;
}

/** "min–max" of the samples, for the notes of a row. */
export function spread(samples: Samples, digits = 0): string {
  return `${samples.min.toFixed(digits)}–${samples.max.toFixed(digits)}`;
}

/** A positive number from the environment (HANGAR_BENCH_SCALE, HANGAR_BENCH_RUNS), or `fallback` when unset. */
export function positiveEnv(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === "") return fallback;
  const number = Number(value);
  if (!Number.isFinite(number) || number <= 0) throw new Error(`${name} must be a positive number, not "${value}"`);
  return number;
}
