// Processes started detached lead a session of their own. With autogroup scheduling (CONFIG_SCHED_AUTOGROUP, on in
// Debian's kernels and most others) every session is a scheduling group of its own, weighed as one against every
// other group whatever the nice value of its processes: under load, 30 plugin calls at nice 19 took the CPU from
// the toolstack as 30 equals, and its reads waited up to 1.7 s for a core. So a detached child's group gets the
// niceness its starter runs at (best effort: a kernel without autogroups, or a user not allowed, keeps the default).
import type { ChildProcess, SpawnOptions } from "node:child_process";

export function spawnDetached(command: string, args: readonly string[], options: Omit<SpawnOptions, "detached">): ChildProcess {
  // Loaded on use: most plugin calls start no process, and node:child_process costs milliseconds to load.
  const child = process.getBuiltinModule("node:child_process").spawn(command, args, { ...options, detached: true });
  const nice = process.getBuiltinModule("node:os").getPriority();
  if (child.pid !== undefined && nice > 0) {
    try {
      process.getBuiltinModule("node:fs").writeFileSync(`/proc/${child.pid}/autogroup`, String(nice));
    } catch {
      // No autogroups here, or not allowed: the child keeps the default group niceness.
    }
  }
  return child;
}
