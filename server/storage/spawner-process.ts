// The small process spawner.ts starts: it starts plugin scripts for its parent and answers each run's outcome.
// It holds next to nothing, so the fork() behind each start is cheap here (see spawner.ts).
import { spawn } from "node:child_process";
import { setPriority } from "node:os";
import { PLUGIN_NICENESS, type RunReply, type RunRequest, type ScriptRun } from "./spawner.ts";

const STDERR_TAIL_BYTES = 4096;

// Plugin scripts, and the daemons they start, run niced (they inherit it): on a busy host the toolstack's own
// answers (reads, event.from, task progress) come first, and storage work takes the CPU that is left.
try {
  setPriority(PLUGIN_NICENESS);
} catch {
  // Not allowed here: the scripts run at our priority.
}

function run(request: RunRequest): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    // detached: the script leads its own process group, so a timeout can kill everything it started.
    const child = spawn(request.script, request.args, { detached: true, stdio: ["pipe", "pipe", "pipe"], env: request.env, cwd: request.cwd });
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
      clearTimeout(timer);
      reject(error);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(stdout), stderrTail: stderrTail.toString("utf8").trim(), timedOut, overflowed });
    });
  });
}

process.on("message", (request: RunRequest) => {
  run(request).then(
    (outcome): RunReply => ({ id: request.id, run: outcome }),
    (error: unknown): RunReply => ({ id: request.id, error: error instanceof Error ? error.message : String(error) }),
  ).then((reply) => process.send!(reply));
});
// The parent is gone: scripts still running go on (they are detached), as they would have without this process.
process.on("disconnect", () => process.exit(0));
