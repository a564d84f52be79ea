// Child processes of a bench run: every one is tracked so that nothing outlives the run, commands have
// time limits (a hung transfer fails its row instead of the run), and daemons that plugins start on their
// own are found again by the environment the run gave them.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { socketAccepts } from "../server/nbd/socket-probe.ts";

const running = new Set<ChildProcess>();

/** Stopped with the run (stopTrackedProcesses), also on Ctrl-C. */
export function track(child: ChildProcess): ChildProcess {
  running.add(child);
  child.once("exit", () => running.delete(child));
  return child;
}

export interface CommandResult {
  stdout: string;
  seconds: number;
}

/** Runs a command to completion within `timeoutMs`; rejects with its stderr if it fails or times out. */
export function runCommand(command: string, args: readonly string[], options: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<CommandResult> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = track(spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: options.env ?? process.env }));
    let stdout = "";
    let stderr = "";
    child.stdout!.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr = (stderr + text).slice(-4000)));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ stdout, seconds });
      else {
        const why = timedOut ? `timed out after ${timeoutMs / 1000} s` : signal !== null ? `killed by ${signal}` : `exit code ${code}`;
        reject(new Error(`${command} ${args.join(" ")}: ${why}${stderr.trim() ? `: ${stderr.trim()}` : ""}`));
      }
    });
  });
}

export interface Service {
  readonly pid: number;
  /** SIGTERM, then SIGKILL after a grace period; resolves once the process is gone. */
  stop(): Promise<void>;
}

/** Starts a long-running process and waits until it accepts connections on `socketPath`. */
export async function startService(command: string, args: readonly string[], socketPath: string, timeoutMs = 30_000): Promise<Service> {
  const child = track(spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr = (stderr + text).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const service: Service = {
    pid: child.pid ?? -1,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await socketAccepts(socketPath))) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${command} exited before listening: ${stderr.trim()}`);
    if (Date.now() > deadline) {
      await service.stop();
      throw new Error(`${command} did not listen on ${socketPath} within ${timeoutMs / 1000} s: ${stderr.trim()}`);
    }
    await sleep(20);
  }
  return service;
}


/** A live process's resident memory now, bytes (NaN when /proc does not say). */
export function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match === null ? Number.NaN : Number(match[1]) * 1024;
}

/** CPU seconds (user + system, all threads) a live process has used so far. */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

/**
 * The main thread's time so far (a Node process's event loop), from the scheduler's own accounting: seconds on
 * a core, and seconds runnable but waiting for one (/proc/<pid>/task/<pid>/schedstat).
 */
export function schedSeconds(pid: number): { running: number; waiting: number } {
  const [running, waiting] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(" ").map(Number);
  return { running: running! / 1e9, waiting: waiting! / 1e9 };
}

/**
 * CPU seconds used so far by the children of this process that have ended and been waited for (their own
 * waited-for children included): around one plugin exec, the CPU that call cost, whatever the load.
 */
export function endedChildrenCpuSeconds(): number {
  const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[13]) + Number(fields[14])) / 100; // cutime + cstime, in USER_HZ (100)
}

/** Kills every process this run started directly. */
export async function stopTrackedProcesses(): Promise<void> {
  const children = [...running];
  for (const child of children) child.kill("SIGKILL");
  await Promise.all(children.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((resolve) => child.once("exit", resolve)))));
}
