// Work that must not fail the call that needed it (Datapath.detach never fails): queued on disk and
// retried by later calls of the same plugin until it succeeds.
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { datapathDir, recordId } from "./datapath-state.ts";

export interface CleanupTask {
  uri: string;
  action: string;
  attempts: number;
  lastError: string;
}

const queueDir = (scheme: string) => join(datapathDir(scheme), "cleanup");

export function queueCleanup(scheme: string, uri: string, action: string, error: unknown): void {
  mkdirSync(queueDir(scheme), { recursive: true });
  const task: CleanupTask = { uri, action, attempts: 1, lastError: error instanceof Error ? error.message : String(error) };
  writeFileSync(join(queueDir(scheme), `${recordId(uri)}-${action}.json`), JSON.stringify(task));
}

export function pendingCleanups(scheme: string): CleanupTask[] {
  try {
    return readdirSync(queueDir(scheme)).map((name) => JSON.parse(readFileSync(join(queueDir(scheme), name), "utf8")) as CleanupTask);
  } catch {
    return [];
  }
}

/** Retries every queued task; a task that fails again stays queued with its new error. */
export async function retryCleanups(scheme: string, run: (task: CleanupTask) => Promise<void>): Promise<void> {
  for (const task of pendingCleanups(scheme)) {
    const file = join(queueDir(scheme), `${recordId(task.uri)}-${task.action}.json`);
    try {
      await run(task);
      rmSync(file, { force: true });
    } catch (error) {
      writeFileSync(file, JSON.stringify({ ...task, attempts: task.attempts + 1, lastError: (error as Error).message }));
    }
  }
}
