// What the fault tests (fault-matrix.test.ts, transfers/console-faults.test.ts) check once a fault is over: the
// processes of a host told apart by their command line (found by its data dir in their environment), and what an
// SR holds against what it should.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { isPidRunning } from "../plugins/filesr/liveness.ts";
import { checkConsistency } from "../plugins/filesr/test-support.ts";
import { processesWithEnv } from "../stray-processes.ts";
import type { XenApiClient } from "./storage-testing.ts";

export type ProcessKind = "toolstack" | "volume daemon" | "datasource daemon" | "gc" | "plugin call" | "other";

export interface HostProcess {
  pid: number;
  kind: ProcessKind;
  argv: string[];
}

/** The live processes of the host whose data dir is `dataDir` (`hangar serve`, the daemons its plugins started, their calls). */
export function hostProcesses(dataDir: string): HostProcess[] {
  return processesWithEnv(`HANGAR_DATA_DIR=${dataDir}`).flatMap((pid) => {
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    } catch {
      return [];
    }
    if (!isPidRunning(pid)) return [];
    const line = argv.join(" ");
    const kind: ProcessKind = line.includes("/cli/main.ts serve")
      ? "toolstack"
      : /\/datapath\/nbd\/(daemon\.ts|\.bundle\/[^/]+\/daemon\.mjs) /.test(line)
        ? "volume daemon"
        : line.includes("datasource-daemon-main.ts ")
          ? "datasource daemon"
          : line.includes("gc-main.ts ")
            ? "gc"
            : /\/plugins\/(volume|datapath)\//.test(line)
              ? "plugin call"
              : "other";
    return [{ pid, kind, argv }];
  });
}

/** The SR directory a datasource daemon writes the datasources of. */
export function datasourceSr(process: HostProcess): string {
  return process.argv[process.argv.findIndex((a) => a.endsWith("datasource-daemon-main.ts")) + 1]!;
}

/**
 * Processes no one owns once every operation is over: anything but the service (`servicePid`) and one datasource
 * daemon per attached SR (`srPaths`) — a volume daemon, a GC run or a plugin call left, or a second datasource daemon.
 */
export function strayProcesses(dataDir: string, servicePid: number, srPaths: readonly string[]): string[] {
  const problems: string[] = [];
  const perSr = new Map<string, number>();
  for (const p of hostProcesses(dataDir)) {
    if (p.kind === "toolstack" && p.pid === servicePid) continue;
    if (p.kind === "datasource daemon") {
      perSr.set(datasourceSr(p), (perSr.get(datasourceSr(p)) ?? 0) + 1);
      continue;
    }
    problems.push(`${p.kind} ${p.pid} left: ${p.argv.slice(1).join(" ")}`);
  }
  for (const [sr, count] of perSr) {
    if (!srPaths.includes(sr)) problems.push(`a datasource daemon of ${sr}, no attached SR of this host`);
    if (count > 1) problems.push(`${count} datasource daemons of ${sr}`);
  }
  return problems;
}

export interface Sr {
  ref: string;
  pbd: string;
  /** Its directory (the file plugin's device_config path). */
  path: string;
}

export async function srOf(client: XenApiClient, ref: string): Promise<Sr> {
  const [pbd] = await client.call<string[]>("SR.get_PBDs", ref);
  return { ref, pbd: pbd!, path: (await client.call<Record<string, string>>("PBD.get_device_config", pbd)).path! };
}

/** Rows of the SR's own database (read-only, beside the plugins that write it). */
export function readSrDb<T>(srPath: string, query: string): T[] {
  const db = new DatabaseSync(join(srPath, "hangar-sr.db"), { readOnly: true, timeout: 15_000 });
  try {
    return db.prepare(query).all() as T[];
  } finally {
    db.close();
  }
}

export const volumeKeys = (srPath: string): Set<string> => new Set(readSrDb<{ key: string }>(srPath, "SELECT key FROM volumes").map((v) => v.key));

/**
 * What is wrong on a file SR: volumes other than `expected` (orphans, or lost ones), layers no volume reads, files
 * of no layer, activations left, and VDI records (after SR.scan) that are not its volumes.
 */
export async function srProblems(client: XenApiClient, sr: Sr, expected: ReadonlySet<string>): Promise<string[]> {
  const problems = checkConsistency(sr.path, { exactFiles: true });
  const volumes = readSrDb<{ key: string; top_layer: number | null }>(sr.path, "SELECT key, top_layer FROM volumes");
  const keys = new Set(volumes.map((v) => v.key));
  for (const key of keys) if (!expected.has(key)) problems.push(`orphan volume ${key}`);
  for (const key of expected) if (!keys.has(key)) problems.push(`volume ${key} is gone`);
  const layers = new Map(readSrDb<{ id: number; parent: number | null }>(sr.path, "SELECT id, parent FROM layers").map((l) => [l.id, l.parent]));
  const reached = new Set<number>();
  for (const volume of volumes) for (let id = volume.top_layer; id !== null && !reached.has(id); id = layers.get(id) ?? null) reached.add(id);
  for (const id of layers.keys()) if (!reached.has(id)) problems.push(`layer ${id} belongs to no volume`);
  for (const a of readSrDb<{ key: string; domain: string }>(sr.path, "SELECT v.key, a.domain FROM activations a JOIN volumes v ON v.id = a.volume")) {
    problems.push(`volume ${a.key} still activated for ${a.domain}`);
  }
  await client.call("SR.scan", sr.ref);
  const vdiKeys = new Set(await Promise.all((await client.call<string[]>("SR.get_VDIs", sr.ref)).map((vdi) => client.call<string>("VDI.get_location", vdi))));
  for (const key of keys) if (!vdiKeys.has(key)) problems.push(`volume ${key} has no VDI record`);
  for (const key of vdiKeys) if (!keys.has(key)) problems.push(`VDI of volume ${key} has no volume`);
  return problems;
}

/** Tasks still pending or cancelling, by name and status. */
export async function unfinishedTasks(client: XenApiClient): Promise<string[]> {
  const tasks = await client.call<Record<string, Record<string, unknown>>>("task.get_all_records");
  return Object.values(tasks)
    .filter((t) => t.status === "pending" || t.status === "cancelling")
    .map((t) => `${String(t.name_label)}: ${String(t.status)}`);
}
