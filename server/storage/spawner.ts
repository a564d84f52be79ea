// Plugin scripts are started by a small process of this one's (spawner-process.ts), not by this process:
// Node starts a child with fork(), whose cost grows with the caller's memory (page tables copied), and it
// runs on the event loop. Measured: a start took 2 ms at 50 MiB RSS, 20 ms at 250 MiB and 54 ms at 850 MiB;
// under load (20 imports) the toolstack spent 16 s of its event loop in spawn and stalled up to 0.9 s.
// Scripts and their daemons run at the toolstack's own priority, not niced: at niceness 19 they held the load
// bench's reads under 50 ms, but any other work on the host at niceness 0 starved them (three busy loops made a
// 7 s test of four exports take 40–128 s), so storage work stalled behind unrelated processes.
import { type ChildProcess, fork } from "node:child_process";
import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import { run } from "./run-script.ts";

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

/**
 * How many scripts of one plugin start at once; the rest wait their turn, in the order asked. Each script is a
 * Node process whose start is a burst of CPU (40–80 ms under load), and a scheduling group of its own
 * (detached-process.ts): 40 at once under load kept the toolstack's event loop waiting for a core for 44 s of
 * 85, and its SR database's writers waiting past their busy time-out. Per plugin, so that one plugin's calls
 * hold no other's back.
 */
export const SCRIPTS_AT_ONCE = Math.max(4, 2 * availableParallelism());
/**
 * A script gives its turn up when it ends or after this long, whichever comes first: one still running is
 * waiting (a lock, its disk, a daemon), not starting. Turns held for whole runs lined calls that fail slowly
 * (an SR removed under them) up into minutes of time-outs one after another.
 */
const TURN_MS = 2000;

const turns = new Map<string, { running: number; waiting: Array<() => void> }>();

async function inTurn<T>(dir: string, work: () => Promise<T>): Promise<T> {
  let turn = turns.get(dir);
  if (turn === undefined) turns.set(dir, (turn = { running: 0, waiting: [] }));
  const mine = turn;
  if (mine.running >= SCRIPTS_AT_ONCE) await new Promise<void>((resolve) => mine.waiting.push(resolve));
  else mine.running++;
  let held = true;
  const giveUp = () => {
    if (!held) return;
    held = false;
    const next = mine.waiting.shift();
    if (next !== undefined) next();
    else if (--mine.running === 0) turns.delete(dir);
  };
  const lent = setTimeout(giveUp, TURN_MS).unref();
  try {
    return await work();
  } finally {
    clearTimeout(lent);
    giveUp();
  }
}

/** Runs a plugin script with `input` on its stdin, in its plugin's turn (inTurn); answers how it ended. */
export function runScript(request: Omit<RunRequest, "id" | "env" | "cwd">): Promise<ScriptRun> {
  if (!enabled) return run({ ...request, id: 0, env: process.env, cwd: process.cwd() });
  return inTurn(dirname(request.script), () => throughSpawner(request));
}

function throughSpawner(request: Omit<RunRequest, "id" | "env" | "cwd">): Promise<ScriptRun> {
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
