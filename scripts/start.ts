// `npm start` after the build: the toolstack (`hangar serve`) and the console (`hangar-console`: `next start`) side by side,
// their output prefixed. The console starts once the toolstack says where it listens, and is pointed there
// (unless HANGAR_TOOLSTACK_URL names another toolstack): whatever port HANGAR_TOOLSTACK_PORT or `0` gave it.
// Ctrl-C or SIGTERM stops both; if either ends, the other is stopped too, and the exit code says which failed.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const processes: Array<{ name: string; child: ChildProcess }> = [];
let stopping = false;

/** The toolstack's announcement ("toolstack listening: http://ADDR:PORT/…") as the URL a local console uses. */
function announcedUrl(line: string): string | undefined {
  const match = /^toolstack listening: http:\/\/(\S+):(\d+)\//.exec(line);
  if (match === null) return undefined;
  const address = match[1] === "0.0.0.0" ? "127.0.0.1" : match[1] === "::" ? "::1" : match[1]!;
  return `http://${address.includes(":") ? `[${address}]` : address}:${match[2]}`;
}

function start(name: string, command: string, env: NodeJS.ProcessEnv, onLine?: (line: string) => void): Promise<number> {
  const child = spawn(join(root, "bin", command), command === "hangar" ? ["serve"] : [], { cwd: root, env, stdio: ["ignore", "pipe", "pipe"] });
  processes.push({ name, child });
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    createInterface({ input: stream }).on("line", (line) => {
      out.write(`[${name}] ${line}\n`);
      onLine?.(line);
    });
  }
  return new Promise<number>((resolve) =>
    child.once("exit", (code, signal) => {
      if (!stopping) {
        process.stderr.write(`[${name}] exited (${signal ?? `code ${code}`}); stopping the rest\n`);
        stopAll("SIGTERM");
      }
      // Asked to stop, a process ending by the signal (or exiting 128 + its number, as `next start` does) stopped cleanly.
      resolve(stopping && (signal !== null || (code !== null && code > 128)) ? 0 : (code ?? 1));
    }),
  );
}

function stopAll(signal: NodeJS.Signals): void {
  stopping = true;
  for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
}

process.once("SIGINT", () => stopAll("SIGINT"));
process.once("SIGTERM", () => stopAll("SIGTERM"));

const exits: Array<Promise<number>> = [];
const listening = new Promise<string | undefined>((resolve) => {
  exits.push(start("toolstack", "hangar", process.env, (line) => {
    const url = announcedUrl(line);
    if (url !== undefined) resolve(url);
  }));
  void exits[0]!.then(() => resolve(undefined));
});
const url = await listening;
if (url !== undefined && !stopping) {
  exits.push(start("console", "hangar-console", { ...process.env, HANGAR_TOOLSTACK_URL: process.env.HANGAR_TOOLSTACK_URL || url }));
}
process.exitCode = Math.max(...(await Promise.all(exits)));
