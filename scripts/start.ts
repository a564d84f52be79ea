// `npm start` after the build: the toolstack (`hangar serve`) and the console (`hangar-console`: `next start`) side by side,
// their output prefixed. Ctrl-C or SIGTERM stops both; if either ends, the other is stopped too, and the
// exit code says which failed.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";

const root = join(import.meta.dirname, "..");
const processes: Array<{ name: string; child: ChildProcess }> = [
  { name: "toolstack", child: spawn(join(root, "bin", "hangar"), ["serve"], { cwd: root, stdio: ["ignore", "pipe", "pipe"] }) },
  { name: "console", child: spawn(join(root, "bin", "hangar-console"), [], { cwd: root, stdio: ["ignore", "pipe", "pipe"] }) },
];

for (const { name, child } of processes) {
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    if (stream !== null) createInterface({ input: stream }).on("line", (line) => out.write(`[${name}] ${line}\n`));
  }
}

let stopping = false;
function stopAll(signal: NodeJS.Signals): void {
  stopping = true;
  for (const { child } of processes) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
}

process.once("SIGINT", () => stopAll("SIGINT"));
process.once("SIGTERM", () => stopAll("SIGTERM"));

const exits = processes.map(
  ({ name, child }) =>
    new Promise<number>((resolve) =>
      child.once("exit", (code, signal) => {
        if (!stopping) {
          process.stderr.write(`[${name}] exited (${signal ?? `code ${code}`}); stopping the rest\n`);
          stopAll("SIGTERM");
        }
        resolve(code ?? (stopping ? 0 : 1));
      }),
    ),
);
process.exitCode = Math.max(...(await Promise.all(exits)));
