// Who runs an operation: filesr's process identity (pid + start time + boot id, zombies counted as gone).
import { currentProcess, isAlive, type ProcessIdentity } from "../../filesr/liveness.ts";

export function thisWorker(): ProcessIdentity {
  return currentProcess();
}

export function workerAlive(worker: ProcessIdentity): boolean {
  return isAlive(worker);
}
