// Datapath I/O counters of an SR, for its datasources. Each process serving I/O keeps cumulative counters
// in memory and rewrites `<sr>/stats/<boot>-<pid>.json` about once a second; when its last volume closes
// (or GC finds it dead) its counters are folded into the SR's `io_totals` row and the file removed, so the
// sum over totals + files only ever grows.
import fs from "node:fs";
import path from "node:path";
import * as z from "zod/mini";
import { srFiles } from "./layout.ts";
import { replaceFileSync, isTemporaryFile } from "./durable.ts";
import { connectSr, statement, transact, type SrConnection } from "./db.ts";
import { currentProcess, isAlive } from "./liveness.ts";

export interface IoCounters {
  readBytes: number;
  writeBytes: number;
  readOps: number;
  writeOps: number;
  /** Sum of the durations of the read operations, microseconds. */
  readLatencyUs: number;
  writeLatencyUs: number;
}

const COUNTER_NAMES = ["readBytes", "writeBytes", "readOps", "writeOps", "readLatencyUs", "writeLatencyUs"] as const;
const COLUMNS = ["read_bytes", "write_bytes", "read_ops", "write_ops", "read_latency_us", "write_latency_us"] as const;

const StatsFileSchema = z.object({
  process: z.object({ machine: z.string(), bootId: z.string(), pid: z.number(), pidStart: z.string() }),
  counters: z.object(Object.fromEntries(COUNTER_NAMES.map((name) => [name, z.number()])) as Record<
    (typeof COUNTER_NAMES)[number],
    z.ZodMiniNumber
  >),
});

const PERSIST_INTERVAL_MS = 1000;

interface Recorder {
  counters: IoCounters;
  users: number;
  changed: boolean;
  timer: NodeJS.Timeout;
}

const recorders = new Map<string, Recorder>();

function zeroCounters(): IoCounters {
  return { readBytes: 0, writeBytes: 0, readOps: 0, writeOps: 0, readLatencyUs: 0, writeLatencyUs: 0 };
}

function ownStatsFile(srPath: string): string {
  const me = currentProcess();
  return path.join(srFiles(srPath).stats, `${me.bootId}-${me.pid}.json`);
}

function persist(srPath: string, recorder: Recorder): void {
  if (!recorder.changed) return;
  recorder.changed = false;
  const body = JSON.stringify({ process: currentProcess(), counters: recorder.counters });
  replaceFileSync(ownStatsFile(srPath), Buffer.from(body), { durable: false });
}

/** Starts counting I/O on `srPath` in this process (reference counted, one per open volume). */
export function startIoRecording(srPath: string): void {
  const existing = recorders.get(srPath);
  if (existing) {
    existing.users++;
    return;
  }
  const recorder: Recorder = { counters: zeroCounters(), users: 1, changed: false, timer: undefined as never };
  recorder.timer = setInterval(() => {
    try {
      persist(srPath, recorder);
    } catch {
      // The SR may be going away under us; the final fold reports what is lost.
    }
  }, PERSIST_INTERVAL_MS).unref();
  recorders.set(srPath, recorder);
}

export function recordIo(srPath: string, kind: "read" | "write", bytes: number, startedNs: bigint): void {
  const recorder = recorders.get(srPath);
  if (!recorder) return;
  const micros = Number((process.hrtime.bigint() - startedNs) / 1000n);
  const counters = recorder.counters;
  if (kind === "read") {
    counters.readBytes += bytes;
    counters.readOps++;
    counters.readLatencyUs += micros;
  } else {
    counters.writeBytes += bytes;
    counters.writeOps++;
    counters.writeLatencyUs += micros;
  }
  recorder.changed = true;
}

function addToTotals(conn: SrConnection, counters: IoCounters): void {
  const assignments = COLUMNS.map((column) => `${column} = ${column} + ?`).join(", ");
  statement(conn, `UPDATE io_totals SET ${assignments} WHERE id = 1`).run(...COUNTER_NAMES.map((name) => counters[name]));
}

/** Stops counting for one closed volume; the last one folds this process's counters into the SR totals. */
export function stopIoRecording(conn: SrConnection): void {
  const recorder = recorders.get(conn.path);
  if (!recorder || --recorder.users > 0) return;
  clearInterval(recorder.timer);
  recorders.delete(conn.path);
  transact(conn, () => {
    addToTotals(conn, recorder.counters);
    fs.rmSync(ownStatsFile(conn.path), { force: true });
  });
}

function readStatsFiles(srPath: string): Array<{ file: string; stats: z.infer<typeof StatsFileSchema> }> {
  const dir = srFiles(srPath).stats;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    if (!name.endsWith(".json") || isTemporaryFile(name)) return [];
    const file = path.join(dir, name);
    try {
      return [{ file, stats: StatsFileSchema.parse(JSON.parse(fs.readFileSync(file, "utf8"))) }];
    } catch {
      return [];
    }
  });
}

/** Folds the counter files of processes that died without closing into the SR totals. */
export function retireDeadIoRecorders(conn: SrConnection): void {
  transact(conn, () => {
    for (const { file, stats } of readStatsFiles(conn.path)) {
      if (isAlive(stats.process)) continue;
      addToTotals(conn, stats.counters);
      fs.rmSync(file, { force: true });
    }
  });
}

/** Cumulative datapath I/O of the SR at `srPath`, over every process that ever served it. */
export function readSrIo(srPath: string): IoCounters {
  const conn = connectSr(srPath);
  const recorder = recorders.get(conn.path);
  if (recorder) persist(conn.path, recorder);
  // Under the write lock, so a fold (file removed, totals raised) is seen entirely or not at all.
  return transact(conn, () => {
    const totalsRow = statement(conn, "SELECT * FROM io_totals WHERE id = 1").get() as Record<string, number>;
    const sum = Object.fromEntries(COUNTER_NAMES.map((name, i) => [name, totalsRow[COLUMNS[i]!] ?? 0])) as unknown as IoCounters;
    for (const { stats } of readStatsFiles(conn.path)) {
      for (const name of COUNTER_NAMES) sum[name] += stats.counters[name];
    }
    return sum;
  });
}
