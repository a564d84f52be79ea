// Where things live on an SR directory, and the fixed geometry of the format.
//
//   <sr>/hangar-sr.db          SQLite metadata (WAL): SR record, volumes, layers, CBT logs, activations...
//   <sr>/hangar-sr.reserve     space held back for the metadata (see db.ts)
//   <sr>/layers/<token>.data   sparse data file of one layer, as large as the layer (offset = disk offset)
//   <sr>/layers/<token>.map    allocation map of that layer (see cluster-map.ts)
//   <sr>/cbt/<token>.cbt       changed-block log (see cbt-log.ts)
//   <sr>/stats/<process>.json  I/O counters of one datapath process (see stats.ts)
import { randomBytes } from "./random.ts";
import path from "node:path";

/** Allocation, copy-on-write and CBT granularity: every volume size is a multiple of it. */
export const CLUSTER_SIZE = 64 * 1024;
export const FORMAT_VERSION = 1;
export const DB_FILE = "hangar-sr.db";

export function srFiles(srPath: string) {
  return {
    db: path.join(srPath, DB_FILE),
    reserve: path.join(srPath, "hangar-sr.reserve"),
    layers: path.join(srPath, "layers"),
    cbt: path.join(srPath, "cbt"),
    stats: path.join(srPath, "stats"),
  };
}

export function layerFiles(srPath: string, token: string) {
  const dir = path.join(srPath, "layers");
  return { data: path.join(dir, `${token}.data`), map: path.join(dir, `${token}.map`) };
}

export function cbtLogFile(srPath: string, token: string): string {
  return path.join(srPath, "cbt", `${token}.cbt`);
}

/** File name stem for a new layer or log; random so a crashed, rolled-back creator never collides. */
export function newToken(): string {
  return randomBytes(8).toString("hex");
}

export function clusterCount(size: number): number {
  return Math.ceil(size / CLUSTER_SIZE);
}

export function roundUpToCluster(size: number): number {
  return clusterCount(size) * CLUSTER_SIZE;
}
