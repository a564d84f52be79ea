// SR datasources in the rrdd plugin protocol v2 (what `xeno+shm:///<uid>` in SR.stat points to); the
// format, its encoder and its reader are in server/storage/rrdd.ts (the console's sampler reads them too).
// The file is rewritten in place; readers skip a sample whose data CRC did not change.
import fs from "node:fs";
import { metricsDir } from "../../config.ts";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { encodeRrdd, type RrddDatasource } from "../../storage/rrdd.ts";
import { CLUSTER_SIZE } from "./layout.ts";
import { connectSr, readSr, statement, transact, type SrConnection } from "./db.ts";
import { deleteHandle, insertHandle, liveHandles } from "./handles.ts";
import { datasourceUid } from "./sr.ts";
import { readSrIo, retireDeadIoRecorders, type IoCounters } from "./stats.ts";
import { spawnDetached } from "../../detached-process.ts";

export { readRrddFile, type DatasourceMeta, type RrddFile } from "../../storage/rrdd.ts";

/** What one write produced; pass it to the next write so latencies cover the interval in between. */
export interface DatasourceSample {
  timestamp: number;
  io: IoCounters;
}

/** Where datasource files go unless a caller says otherwise (config.ts: HANGAR_METRICS_DIR). */
export function defaultMetricsDir(): string {
  return metricsDir();
}

/** Average latency in milliseconds of the operations between two counter readings. */
function latencyMs(latencyUs: number, ops: number): number {
  return ops > 0 ? latencyUs / ops / 1000 : 0;
}

/**
 * Writes the SR's datasources to `<dir>/hangar-sr-<uuid>`: free/used/total space, datapath read and write
 * bytes and operations (cumulative, type derive: rrdd turns them into B/s and IOPS) and average latencies
 * since `previous` (or since the SR's first I/O).
 */
export async function writeSrDatasources(srPath: string, dir = defaultMetricsDir(), previous?: DatasourceSample): Promise<DatasourceSample> {
  const conn = connectSr(srPath);
  const sr = readSr(conn);
  retireDeadIoRecorders(conn);
  const io = readSrIo(conn.path);
  const used = (statement(conn, "SELECT coalesce(sum(allocated), 0) AS clusters FROM layers").get() as { clusters: number }).clusters * CLUSTER_SIZE;
  const space = fs.statfsSync(conn.path);
  const before = previous?.io;
  const delta = (name: keyof IoCounters) => io[name] - (before?.[name] ?? 0);
  const timestamp = Date.now() / 1000;
  const datasources: RrddDatasource[] = [
    { name: "free_space", value: space.bavail * space.bsize, valueType: "int64", type: "gauge", units: "B", description: "Free space on the SR's filesystem" },
    { name: "total_space", value: space.blocks * space.bsize, valueType: "int64", type: "gauge", units: "B", description: "Size of the SR's filesystem" },
    { name: "used_space", value: used, valueType: "int64", type: "gauge", units: "B", description: "Space allocated to the SR's volumes" },
    { name: "io_read_bytes", value: io.readBytes, valueType: "int64", type: "derive", units: "B/s", description: "Datapath read throughput" },
    { name: "io_write_bytes", value: io.writeBytes, valueType: "int64", type: "derive", units: "B/s", description: "Datapath write throughput" },
    { name: "iops_read", value: io.readOps, valueType: "int64", type: "derive", units: "requests/s", description: "Datapath read operations" },
    { name: "iops_write", value: io.writeOps, valueType: "int64", type: "derive", units: "requests/s", description: "Datapath write operations" },
    { name: "read_latency", value: latencyMs(delta("readLatencyUs"), delta("readOps")), valueType: "float", type: "gauge", units: "ms", description: "Average datapath read latency" },
    { name: "write_latency", value: latencyMs(delta("writeLatencyUs"), delta("writeOps")), valueType: "float", type: "gauge", units: "ms", description: "Average datapath write latency" },
  ];
  const file = path.join(dir, datasourceUid(sr.uuid));
  fs.mkdirSync(dir, { recursive: true });
  const encoded = encodeRrdd(timestamp, `sr ${sr.uuid}`, datasources);
  // In place, as rrdd readers expect: they reread the same file and check its CRC.
  const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
  try {
    fs.writeSync(fd, encoded, 0, encoded.length, 0);
    fs.ftruncateSync(fd, encoded.length);
  } finally {
    fs.closeSync(fd);
  }
  return { timestamp, io };
}

/**
 * Refreshes the SR's datasource file every `intervalMs` until the SR is detached or gone (or `signal`
 * aborts), then removes the file. A second daemon for the same SR returns at once.
 */
export async function runDatasourceDaemon(
  srPath: string,
  dir = defaultMetricsDir(),
  intervalMs = 5000,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  let sr: SrConnection;
  try {
    sr = connectSr(srPath);
  } catch {
    return;
  }
  const lease = transact(sr, () => (liveHandles(sr, "purpose = 'daemon'").length > 0 ? null : insertHandle(sr, "daemon", {})));
  if (lease === null) return;
  const file = path.join(dir, datasourceUid(readSr(sr).uuid));
  let previous: DatasourceSample | undefined;
  try {
    while (!options.signal?.aborted) {
      try {
        if (!readSr(connectSr(srPath)).attached) break;
      } catch {
        break;
      }
      previous = await writeSrDatasources(srPath, dir, previous);
      await sleep(intervalMs, undefined, { signal: options.signal }).catch(() => undefined);
    }
  } finally {
    fs.rmSync(file, { force: true });
    try {
      transact(sr, () => deleteHandle(sr, lease));
    } catch {
      // The SR is gone, and its handles with it.
    }
  }
}

/** Starts runDatasourceDaemon in a detached background process (call it from SR.attach); returns its pid. */
export function startDatasourceDaemon(srPath: string, dir = defaultMetricsDir(), intervalMs = 5000): number {
  const main = fileURLToPath(new URL("./datasource-daemon-main.ts", import.meta.url));
  const child = spawnDetached(process.execPath, [main, path.resolve(srPath), dir, String(intervalMs)], { stdio: "ignore" });
  child.unref();
  return child.pid ?? -1;
}
