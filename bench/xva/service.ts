// `hangar serve` for the XVA suite: a process of its own over a data dir on tmpfs, and what it costs while a
// transfer runs. CPU is the service's own (utime + stime), its plugin execs' once reaped (cutime + cstime),
// and the volume daemons' that serve the disks over NBD: those are detached, so they are sampled from
// /proc while the transfer runs (a daemon leaves by itself once its volume is released). Peak memory is the
// service's VmHWM, reset before each transfer through clear_refs.
import { readFileSync, writeFileSync } from "node:fs";
import { XenApiClient } from "../../server/xenapi/client.ts";
import { ROOT_PASSWORD, startServeProcess } from "../../server/toolstack/testing.ts";
import { cpuSeconds, rssBytes } from "../processes.ts";
import { processesWithEnv } from "../../server/stray-processes.ts";

export interface XvaService {
  /** Base URL, ending in "/". */
  readonly url: string;
  readonly pid: number;
  readonly client: XenApiClient;
  /** The SR imports go to (default: the pool's default SR). */
  readonly importSr?: string;
  stop(): Promise<void>;
}

export async function startXvaService(dataDir: string, env: Record<string, string> = {}): Promise<XvaService> {
  // The run dir of the bench workspace: its clean-up (also on Ctrl-C) finds the service and its daemons by it.
  const serve = await startServeProcess(dataDir, { HANGAR_RUN_DIR: process.env.HANGAR_RUN_DIR, ...env });
  try {
    const client = await XenApiClient.login(serve.url, "root", ROOT_PASSWORD, "hangar-bench-xva");
    return { url: serve.url, pid: serve.pid, client, stop: serve.stop };
  } catch (error) {
    await serve.stop();
    throw error;
  }
}

function statFields(pid: number): string[] {
  return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
}

/** CPU seconds of a live process's reaped children (cutime + cstime). */
function reapedChildrenSeconds(pid: number): number {
  const fields = statFields(pid);
  return (Number(fields[13]) + Number(fields[14])) / 100; // USER_HZ is 100 on Linux
}

export interface Cost {
  /** The service's own CPU seconds, and its reaped plugin execs'. */
  service: number;
  plugins: number;
  /** The volume daemons' (NBD servers of the disks). */
  daemons: number;
  /** Resident set of the service when the transfer began, and its peak during it (VmHWM), bytes. */
  startRss: number;
  peakRss: number;
}

const SAMPLE_MS = 200;

/** Measures what the service and its daemons spend until the returned function is called. */
export function meterService(service: XvaService): () => Cost {
  // Clears the high-water mark: VmHWM starts again from the current RSS.
  writeFileSync(`/proc/${service.pid}/clear_refs`, "5");
  const startRss = currentRss(service);
  const own = cpuSeconds(service.pid);
  const plugins = reapedChildrenSeconds(service.pid);
  const marker = `HANGAR_RUN_DIR=${process.env.HANGAR_RUN_DIR}`;
  // pid → [CPU when first seen, CPU last seen]; processes this run starts itself (curl, the tools) and the
  // service's own children (counted when reaped) are not daemons.
  const daemons = new Map<number, [number, number]>();
  let first = true;
  const sample = () => {
    for (const pid of processesWithEnv(marker)) {
      try {
        if (pid === service.pid) continue;
        const parent = Number(statFields(pid)[1]);
        if (parent === process.pid || parent === service.pid) continue;
        const cpu = cpuSeconds(pid);
        const seen = daemons.get(pid);
        if (seen === undefined) daemons.set(pid, [first ? cpu : 0, cpu]);
        else seen[1] = cpu;
      } catch {
        // Gone meanwhile: its last sample stands.
      }
    }
    first = false;
  };
  sample();
  const timer = setInterval(sample, SAMPLE_MS);
  return () => {
    clearInterval(timer);
    sample();
    const status = readFileSync(`/proc/${service.pid}/status`, "utf8");
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status);
    return {
      service: cpuSeconds(service.pid) - own,
      plugins: reapedChildrenSeconds(service.pid) - plugins,
      daemons: [...daemons.values()].reduce((sum, [from, to]) => sum + to - from, 0),
      startRss,
      peakRss: hwm === null ? Number.NaN : Number(hwm[1]) * 1024,
    };
  };
}

/** The service's resident set now, bytes. */
export function currentRss(service: XvaService): number {
  return rssBytes(service.pid);
}
