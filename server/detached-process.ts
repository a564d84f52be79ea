// Processes started detached lead a session (and process group) of their own, so that a time-out or a stop can
// kill everything one started at once.
import type { ChildProcess, SpawnOptions } from "node:child_process";

export function spawnDetached(command: string, args: readonly string[], options: Omit<SpawnOptions, "detached">): ChildProcess {
  // Loaded on use: most plugin calls start no process, and node:child_process costs milliseconds to load.
  return process.getBuiltinModule("node:child_process").spawn(command, args, { ...options, detached: true });
}
