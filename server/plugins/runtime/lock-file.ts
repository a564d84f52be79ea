// A lock between processes: a file created exclusively, holding the owner's pid. A lock whose owner is
// gone (a killed call) is taken over at once; one older than `staleMs` is taken over in any case.
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { isPidRunning } from "../filesr/liveness.ts";

export async function withLockFile<T>(lockFile: string, body: () => Promise<T>, staleMs = 30_000): Promise<T> {
  for (let waited = 0; ; waited += 10) {
    try {
      writeFileSync(lockFile, String(process.pid), { flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (waited >= staleMs || ownerGone(lockFile)) rmSync(lockFile, { force: true });
      await sleep(10);
    }
  }
  try {
    return await body();
  } finally {
    rmSync(lockFile, { force: true });
  }
}

function ownerGone(lockFile: string): boolean {
  try {
    const pid = Number(readFileSync(lockFile, "utf8"));
    // An empty file is a lock being written right now, not an abandoned one.
    return Number.isInteger(pid) && pid > 0 && !isPidRunning(pid);
  } catch {
    return false;
  }
}
