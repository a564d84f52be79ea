// Which process holds something (a datapath handle, a GC run, a pause request), and whether it still runs.
// A pid alone is reused; pid + process start time + boot id names one process on one machine for good.
import fs from "node:fs";
import os from "node:os";
import { hostUuid } from "../../config.ts";

export interface ProcessIdentity {
  machine: string;
  bootId: string;
  pid: number;
  pidStart: string;
}

function readBootId(): string {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return "unknown";
  }
}

/**
 * Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or null when the pid is gone or a
 * zombie: a killed process stays a zombie until whoever inherited it reaps it, which may take forever.
 */
function readPidStart(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count fields after its closing ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[0] === "Z" ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** Whether a process of this machine runs (a zombie does not). */
export function isPidRunning(pid: number): boolean {
  return readPidStart(pid) !== null;
}

let self: ProcessIdentity | undefined;

export function currentProcess(): ProcessIdentity {
  if (self?.pid !== process.pid) {
    self = { machine: os.hostname(), bootId: readBootId(), pid: process.pid, pidStart: readPidStart(process.pid) ?? "" };
  }
  return self;
}

/** False only when we can tell the process is gone: same machine and (another boot, or pid not that process). */
export function isAlive(identity: ProcessIdentity): boolean {
  const me = currentProcess();
  if (identity.machine !== me.machine) return true;
  if (identity.bootId !== me.bootId) return false;
  return readPidStart(identity.pid) === identity.pidStart;
}

/** The host uuid recorded with activations and handles: HANGAR_HOST_UUID, else the host name. */
export function localHostId(): string {
  return hostUuid();
}
