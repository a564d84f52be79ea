// Processes found by their environment: the daemons that plugin calls start detached (NBD servers, GC,
// datasource daemons) outlive the call that started them. A test or bench run gives its plugins a private
// data or run dir, so an environment entry naming that dir finds exactly its own daemons, to stop them.
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Pids of processes whose environment holds `entry` exactly (e.g. `HANGAR_RUN_DIR=/tmp/hangar-bench-x/run`):
 * the daemons plugin calls of one run started.
 */
export function processesWithEnv(entry: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(entry)) found.push(pid);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}

/** SIGKILLs the given pids (each by id) and waits until they are gone. */
export async function killPids(pids: readonly number[]): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  for (let waited = 0; waited < 5000 && pids.some(isRunning); waited += 20) await sleep(20);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    // A zombie is gone for our purposes (its parent, maybe not us, reaps it).
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.startsWith("Z");
  } catch {
    return false;
  }
}
