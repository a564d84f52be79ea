// The spawner of `hangar serve`: scripts run through it answer as when run directly, and when the process that
// asked for them dies (kill -9), the scripts still under way stop with it instead of finishing for no one.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { enableSpawner, runScript, SCRIPTS_AT_ONCE } from "./spawner.ts";

const dir = mkdtempSync(join(tmpdir(), "hangar-spawner-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${pid}/stat`, "utf8").includes(") Z ");
  } catch {
    return false;
  }
};

describe("the plugin script spawner", () => {
  test("a script's exit, stdout and stderr come back through it", async () => {
    enableSpawner();
    const run = await runScript({ script: "/bin/sh", args: ["-c", "cat; echo oops >&2; exit 3"], input: "hello", timeoutMs: 10_000, maxOutputBytes: 1024 });
    assert.equal(run.code, 3);
    assert.equal(run.stdout.toString(), "hello");
    assert.equal(run.stderrTail, "oops");
  });

  test(`a plugin's scripts start ${SCRIPTS_AT_ONCE} at a time; one still running after its turn (2 s) lets the next start`, async () => {
    enableSpawner();
    const plugin = join(dir, "plugin");
    mkdirSync(plugin, { recursive: true });
    const starts = join(dir, "starts");
    mkdirSync(starts, { recursive: true });
    // Each says when it started, then runs on for 6 s.
    writeFileSync(join(plugin, "Volume.slow"), `#!/bin/sh\ndate +%s%N > ${starts}/$$\nsleep 6\n`, { mode: 0o755, flag: "w" });
    const runs = Array.from({ length: SCRIPTS_AT_ONCE + 1 }, () => runScript({ script: join(plugin, "Volume.slow"), args: [], input: "", timeoutMs: 30_000, maxOutputBytes: 1024 }));
    await sleep(1000);
    assert.equal(readdirSync(starts).length, SCRIPTS_AT_ONCE, "the first ones started, the last waits its turn");
    const ran = await Promise.all(runs);
    assert.ok(ran.every((run) => run.code === 0));
    const ms = readdirSync(starts).map((pid) => Number(readFileSync(join(starts, pid), "utf8")) / 1e6).sort((a, b) => a - b);
    const last = ms.at(-1)! - ms[0]!;
    assert.ok(last >= 1500 && last < 5000, `the last started ${last.toFixed(0)} ms after the first: when a turn was given up, before any script ended`);
  });

  test("kill -9 of its caller: the scripts under way are killed, with what they started in their group", async () => {
    const pids = join(dir, "pids");
    const caller = spawn(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { enableSpawner, runScript } from ${JSON.stringify(new URL("./spawner.ts", import.meta.url).href)};
         enableSpawner();
         void runScript({ script: "/bin/sh", args: ["-c", "sleep 60 & echo $$ $! > ${pids}; wait"], input: "", timeoutMs: 60_000, maxOutputBytes: 1024 });`,
      ],
      { stdio: "inherit" },
    );
    let started: number[] = [];
    for (let waited = 0; started.length < 2 && waited < 10_000; waited += 50) {
      await sleep(50);
      try {
        started = readFileSync(pids, "utf8").trim().split(" ").map(Number);
      } catch {
        // not yet
      }
    }
    assert.equal(started.length, 2, "the script started");
    assert.ok(started.every(alive));
    caller.kill("SIGKILL");
    for (let waited = 0; started.some(alive) && waited < 5000; waited += 50) await sleep(50);
    assert.deepEqual(started.filter(alive), [], "the script and its child are gone");
  });
});
