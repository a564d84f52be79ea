// A process and its descendants read from /proc: the console is `next start` and the server it forks, Chromium
// a browser process and its renderers, so their memory and CPU are those of the whole tree.
import { readdirSync, readFileSync } from "node:fs";

function children(pid: number): number[] {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tasks.flatMap((task) => {
    try {
      return readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** The process and all its descendants. */
export function tree(pid: number): number[] {
  return [pid, ...children(pid).flatMap(tree)];
}

/** The direct children of `pid` whose command name (`/proc/<pid>/comm`) is `name`. */
export function childrenNamed(pid: number, name: string): number[] {
  return children(pid).filter((child) => {
    try {
      return readFileSync(`/proc/${child}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

/** Resident bytes of one process (0 once it is gone). */
export function processRssBytes(pid: number): number {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

/** Resident bytes of the whole tree. */
export function rssBytes(pid: number): number {
  return tree(pid).reduce((total, member) => total + processRssBytes(member), 0);
}

/** CPU seconds the tree has used so far: each member's own and its reaped children's (utime + stime + cutime + cstime). */
export function treeCpuSeconds(pid: number): number {
  let ticks = 0;
  for (const member of tree(pid)) {
    try {
      const fields = readFileSync(`/proc/${member}/stat`, "utf8").split(") ")[1]!.split(" ");
      ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    } catch {
      // gone meanwhile: its CPU is now its parent's cutime
    }
  }
  return ticks / 100; // USER_HZ is 100 on Linux
}
