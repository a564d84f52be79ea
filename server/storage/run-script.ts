// One plugin script run: started in its own process group, its stdin given, its stdout kept (up to a cap) and
// the tail of its stderr, its whole group killed on time-out. Used in the toolstack's spawner process, and
// directly by any other caller (spawner.ts).
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import { spawnDetached } from "../detached-process.ts";
import type { RunRequest, ScriptRun } from "./spawner.ts";

const STDERR_TAIL_BYTES = 4096;

/** The process groups of the scripts under way. */
const running = new Set<number>();

/** Kills every script under way with all it started in its group (the caller that waits for them is gone). */
export function killRunning(): void {
  for (const group of running) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

export function run(request: RunRequest): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    // detached: the script leads its own process group, so a timeout can kill everything it started.
    const child = spawnDetached(request.script, request.args, { stdio: ["pipe", "pipe", "pipe"], env: request.env, cwd: request.cwd }) as ChildProcessWithoutNullStreams;
    const group = child.pid;
    if (group !== undefined) running.add(group);
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderrTail = Buffer.alloc(0);
    let timedOut = false;
    let overflowed = false;
    const killGroup = () => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, request.timeoutMs);
    child.stdout.on("data", (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > request.maxOutputBytes) {
        if (!overflowed) killGroup();
        overflowed = true;
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderrTail = Buffer.concat([stderrTail, chunk]);
      if (stderrTail.length > STDERR_TAIL_BYTES) stderrTail = stderrTail.subarray(stderrTail.length - STDERR_TAIL_BYTES);
    });
    // A script that exits without reading stdin closes the pipe; that is its business, not an error.
    child.stdin.on("error", () => {});
    child.stdin.end(request.input);
    child.on("error", (error) => {
      if (group !== undefined) running.delete(group);
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      if (group !== undefined) running.delete(group);
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(stdout), stderrTail: stderrTail.toString("utf8").trim(), timedOut, overflowed });
    });
  });
}
