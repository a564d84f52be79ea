// HANGAR_BENCH_CPU_PROF=<dir>: the service (and every Node process it starts) runs with --cpu-prof into
// <dir>, and at the end the profiles are summed up by self time, per process kind: where the service spends
// its time, for whoever optimises it. Profiling slows everything down: the table of such a run is not a
// measurement.
import { readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** NODE_OPTIONS for the service when profiling is asked for. */
export function profilingEnv(dir: string | undefined): Record<string, string> {
  return dir === undefined ? {} : { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --cpu-prof --cpu-prof-dir=${dir}`.trim() };
}

/** Self milliseconds per function in one profile. */
function selfTimes(profile: CpuProfile): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const times = new Map<string, number>();
  profile.samples.forEach((id, n) => {
    const frame = byId.get(id)!.callFrame;
    const where = frame.url === "" ? "" : ` ${frame.url.replace(/^file:\/\/.*?\/(server|node_modules)\//, "$1/")}:${frame.lineNumber + 1}`;
    const name = `${frame.functionName || "(anonymous)"}${where}`;
    times.set(name, (times.get(name) ?? 0) + (profile.timeDeltas[n] ?? 0) / 1000);
  });
  return times;
}

/**
 * The top `top` functions by self time, per group: the service's main thread, its worker threads (the
 * compressors), and the other processes (volume daemons, plugin execs). File names are
 * CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile.
 */
export function summariseProfiles(dir: string, servicePid: number, top = 15): string {
  const groups = new Map<string, { files: number; total: number; times: Map<string, number> }>();
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"))) {
    const [, , , pid, thread] = basename(file).split(".");
    const group = Number(pid) === servicePid ? (thread === "0" ? "service, main thread" : "service, worker threads") : "other processes (daemons, plugins)";
    let profile: CpuProfile;
    try {
      profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile;
    } catch {
      continue; // cut short (a process killed while writing it)
    }
    const entry = groups.get(group) ?? { files: 0, total: 0, times: new Map<string, number>() };
    entry.files++;
    for (const [name, ms] of selfTimes(profile)) {
      entry.times.set(name, (entry.times.get(name) ?? 0) + ms);
      entry.total += ms;
    }
    groups.set(group, entry);
  }
  const lines: string[] = [];
  for (const [group, { files, total, times }] of groups) {
    lines.push(`${group}: ${files} profile(s), ${(total / 1000).toFixed(1)} s sampled`);
    for (const [name, ms] of [...times].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      lines.push(`  ${(ms / 1000).toFixed(2).padStart(7)} s ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
    }
  }
  return lines.join("\n");
}
