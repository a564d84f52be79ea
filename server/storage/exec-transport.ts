// The xapi-storage-script convention (compat-notes §1): run `<dir>/<Interface>.<method> --json`, params as one
// line on stdin, the bare result on stdout; a non-zero exit prints an error object instead.
import { appendFileSync, constants } from "node:fs";
import { access, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { CALLER_CODES, StorageError, parseWireError } from "./errors.ts";
import { parseWireJson } from "./json.ts";
import { runScript, type ScriptRun } from "./spawner.ts";
import type { Transport } from "./transport.ts";

export const DEFAULT_TIMEOUT_MS = 60_000;
const DEFAULT_MAX_OUTPUT_BYTES = 512 * 1024 * 1024;

export interface ExecTransportOptions {
  /** Kill the script's whole process group after this long (default 60 s). */
  timeoutMs?: number;
  /** Refuse results larger than this (default 512 MiB). */
  maxOutputBytes?: number;
}

export function createExecTransport(dir: string, plugin: string, options: ExecTransportOptions = {}): Transport {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  return {
    description: `exec ${dir}`,
    async invoke(method, paramsJson) {
      const script = await findScript(dir, method, plugin);
      let run: ScriptRun;
      const started = performance.now();
      try {
        run = await runScript({ script, args: ["--json"], input: `${paramsJson}\n`, timeoutMs, maxOutputBytes });
      } catch (error) {
        // e.g. a `#!` line naming an interpreter this host lacks: the script exists but cannot start.
        const why = `cannot start ${script}: ${(error as Error).message}`;
        throw new StorageError(CALLER_CODES.scriptFailed, [plugin, method, why], `plugin ${plugin} ${method}: ${why}`);
      }
      trace(plugin, method, run, performance.now() - started);
      return interpret(run, timeoutMs, plugin, method);
    },
  };
}

/** HANGAR_PLUGIN_TRACE=<file>: one line per call (end time, plugin, method, exit code, wall ms), to see where an operation's time goes. */
function trace(plugin: string, method: string, run: ScriptRun, ms: number): void {
  const file = process.env.HANGAR_PLUGIN_TRACE;
  if (file === undefined || file === "") return;
  try {
    appendFileSync(file, `${new Date().toISOString()} ${plugin} ${method} ${run.code ?? run.signal} ${ms.toFixed(0)}\n`);
  } catch {
    // A trace that cannot be written must not fail the call.
  }
}

/** Case-insensitive lookup, as the real toolstack does (`Plugin.query` finds `Plugin.Query`). */
export async function findScript(dir: string, method: string, plugin: string): Promise<string> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (error) {
    throw new StorageError(CALLER_CODES.scriptMissing, [join(dir, method)], `plugin ${plugin}: cannot read ${dir}: ${(error as Error).message}`);
  }
  const wanted = method.toLowerCase();
  const name = entries.includes(method) ? method : entries.find((entry) => entry.toLowerCase() === wanted);
  const path = join(dir, name ?? method);
  // stat follows symlinks (entries are often links to one dispatcher); a dangling one is a missing script.
  const isFile = name !== undefined && (await stat(path).then((s) => s.isFile(), () => false));
  if (!isFile) {
    throw new StorageError(CALLER_CODES.scriptMissing, [path], `plugin ${plugin} does not implement ${method} (no script ${path})`);
  }
  try {
    await access(path, constants.X_OK);
  } catch {
    throw new StorageError(CALLER_CODES.scriptNotExecutable, [path], `plugin ${plugin}: ${path} is not executable`);
  }
  return path;
}

function interpret(run: ScriptRun, timeoutMs: number, plugin: string, method: string): unknown {
  const failed = (why: string) => {
    const tail = run.stderrTail === "" ? "" : `; stderr: ${run.stderrTail}`;
    return new StorageError(CALLER_CODES.scriptFailed, [plugin, method, why, run.stderrTail], `plugin ${plugin} ${method}: ${why}${tail}`);
  };
  if (run.timedOut) throw failed(`timed out after ${timeoutMs / 1000} s; its process group was killed`);
  if (run.overflowed) throw failed(`printed more output than the limit allows`);
  if (run.signal !== null) throw failed(`killed by signal ${run.signal}`);
  const text = run.stdout.toString("utf8");
  if (text.trim() === "") throw failed(run.code === 0 ? "empty output (a method without result prints null)" : `exit code ${run.code} with no error on stdout`);
  let value: unknown;
  try {
    value = parseWireJson(text);
  } catch (error) {
    throw failed(`${run.code === 0 ? "" : `exit code ${run.code}, `}bad JSON on stdout (${(error as Error).message}): ${text.slice(0, 200)}`);
  }
  if (run.code === 0) return value;
  throw parseWireError(value) ?? failed(`exit code ${run.code}; stdout is not an error object: ${text.slice(0, 200)}`);
}
