// Sizes and repetitions of the toolstack suite. HANGAR_BENCH_SCALE (default 1: the sizes the rows are
// stated for) scales the number of calls and of volumes; HANGAR_BENCH_RUNS sets the rounds.
import { positiveEnv } from "../measure.ts";

export interface ToolstackSizes {
  scale: number;
  /** Interleaved rounds of every latency contender (samples of all rounds are pooled). */
  rounds: number;
  /** Objects seeded before the latency rows. */
  vms: number;
  tasks: number;
  /** SRs of the "many SRs" row. */
  srs: number;
  /** Volumes of the big SR of the listing row. */
  volumes: number;
  /** Calls each caller makes per round: one caller alone, and each of many callers. */
  callsAlone: number;
  callsEach: number;
  /** Concurrent callers of the busy rows. */
  callers: number;
  /** Repetitions of the slow listings (many SRs cold, 10,000 volumes). */
  listings: number;
}

export function toolstackSizes(): ToolstackSizes {
  const scale = positiveEnv("HANGAR_BENCH_SCALE", 1);
  const rounds = Math.round(positiveEnv("HANGAR_BENCH_RUNS", 3));
  const scaled = (n: number, least: number) => Math.max(least, Math.round(n * scale));
  return {
    scale,
    rounds,
    vms: 100,
    tasks: 100,
    srs: 10,
    volumes: scaled(10_000, 100),
    callsAlone: scaled(200, 20),
    callsEach: scaled(5, 1),
    callers: 200,
    listings: Math.max(5, rounds * 2),
  };
}
