// Plugin scripts are started by a small process of this one's (spawner-process.ts), not by this process:
// Node starts a child with fork(), whose cost grows with the caller's memory (page tables copied), and it
// runs on the event loop. Measured: a start took 2 ms at 50 MiB RSS, 20 ms at 250 MiB and 54 ms at 850 MiB;
// under load (20 imports) the toolstack spent 16 s of its event loop in spawn and stalled up to 0.9 s.
import { type ChildProcess, fork } from "node:child_process";
import { run } from "./run-script.ts";

/** The niceness plugin scripts and their daemons run at (see spawner-process.ts). */
export const PLUGIN_NICENESS = 10;

export interface RunRequest {
  id: number;
  script: string;
  args: string[];
  input: string;
  timeoutMs: number;
  maxOutputBytes: number;
  /** The caller's environment and directory at the call (tests change them as they go). */
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export interface ScriptRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderrTail: string;
  timedOut: boolean;
  overflowed: boolean;
}

export type RunReply = { id: number; run: ScriptRun; error?: undefined } | { id: number; error: string; run?: undefined };

interface Spawner {
  child: ChildProcess;
  pending: Map<number, { resolve(run: ScriptRun): void; reject(error: Error): void }>;
}

let current: Spawner | undefined;
let nextId = 0;
let enabled = false;

/**
 * Plugin scripts of this process go through the spawner from now on: `hangar serve` asks for it (its memory, and
 * so each fork, is what grows). Other callers (the CLI, the console, whose bundler cannot start the spawner's
 * source as a process) start scripts themselves.
 */
export function enableSpawner(): void {
  enabled = true;
}

function start(): Spawner {
  // An environment of its own that names nothing of ours: the processes a test finds by its data dir are the
  // scripts this starts, never this.
  const child = fork(new URL("./spawner-process.ts", import.meta.url), [], { execArgv: [], env: {} as NodeJS.ProcessEnv, serialization: "advanced", stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const spawner: Spawner = { child, pending: new Map() };
  child.on("message", (reply: RunReply) => {
    const call = spawner.pending.get(reply.id);
    if (call === undefined) return;
    spawner.pending.delete(reply.id);
    idle(spawner);
    if (reply.error !== undefined) call.reject(new Error(reply.error));
    else call.resolve({ ...reply.run, stdout: Buffer.from(reply.run.stdout) });
  });
  child.on("error", () => undefined);
  child.on("exit", (code, signal) => {
    if (current === spawner) current = undefined;
    for (const call of spawner.pending.values()) call.reject(new Error(`the process that starts plugin scripts ended (${signal ?? `exit code ${code}`})`));
    spawner.pending.clear();
  });
  return spawner;
}

/** Without calls under way the spawner keeps nothing alive (a process may end with it idle). */
function idle(spawner: Spawner): void {
  if (spawner.pending.size > 0) return;
  spawner.child.unref();
  spawner.child.channel?.unref();
}

/** Runs a plugin script with `input` on its stdin; answers how it ended. */
export function runScript(request: Omit<RunRequest, "id" | "env" | "cwd">): Promise<ScriptRun> {
  if (!enabled) return run({ ...request, id: 0, env: process.env, cwd: process.cwd() });
  const spawner = (current ??= start());
  spawner.child.ref();
  spawner.child.channel?.ref();
  const id = nextId++;
  return new Promise<ScriptRun>((resolve, reject) => {
    spawner.pending.set(id, { resolve, reject });
    spawner.child.send({ ...request, id, env: { ...process.env }, cwd: process.cwd() } satisfies RunRequest, (error) => {
      if (error === null || !spawner.pending.has(id)) return;
      spawner.pending.delete(id);
      idle(spawner);
      reject(error);
    });
  });
}
