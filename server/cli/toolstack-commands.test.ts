// The toolstack's commands as a user runs them (bin/hangar, not on a terminal) against `hangar serve`
// running as its own process: tables, --json, waiting for tasks, VDI operations and their failures.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { ROOT_PASSWORD, type ServeProcess, startServeProcess, tempDataDir } from "../toolstack/testing.ts";
import { toolstackCommands } from "./toolstack-commands.ts";
import { XenApiClient, zTaskRecord } from "./xenapi-client.ts";

const HANGAR = fileURLToPath(new URL("../../bin/hangar", import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function hangar(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(HANGAR, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr += text));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

function ok(run: Run): Run {
  assert.equal(run.code, 0, `exit code (stderr: ${run.stderr})`);
  return run;
}

/** Rows of a printed table, cells split on runs of 2+ spaces. */
const rows = (text: string) => text.trimEnd().split("\n").map((line) => line.split(/ {2,}/));

let service: ServeProcess;
let client: XenApiClient;
/** The environment that points the commands at the service. */
let env: Record<string, string>;

before(async () => {
  service = await startServeProcess(await tempDataDir());
  env = { HANGAR_URL: service.url, HANGAR_PASSWORD: ROOT_PASSWORD };
  client = await XenApiClient.login(service.url, "root", ROOT_PASSWORD);
});

after(async () => {
  await service.stop();
  await rm(service.dataDir, { recursive: true, force: true });
});

describe("hangar toolstack commands", { concurrency: 4 }, () => {
  test("--help of every command names its options; hangar --help lists the commands", async () => {
    const top = ok(await hangar(["--help"]));
    for (const [name, command] of Object.entries(toolstackCommands)) {
      assert.match(top.stdout, new RegExp(`^  ${name} +${command.summary.slice(0, 20).replace(/[()]/g, "\\$&")}`, "m"));
    }
    const runs = await Promise.all(Object.keys(toolstackCommands).map((name) => hangar([name, "--help"])));
    for (const run of runs) {
      assert.equal(run.code, 0);
      assert.match(run.stdout, /^Usage: hangar [a-z-]+/);
      for (const option of ["--url URL", "--user NAME", "--json", "HANGAR_PASSWORD", "HANGAR_URL"]) assert.ok(run.stdout.includes(option), option);
    }
    assert.match(ok(await hangar(["vdi-copy", "--help"])).stdout, /--sr SR/);
  });

  test("connection problems: no password off a terminal, a wrong one, nothing listening", async () => {
    const noPassword = await hangar(["sr-list"], { HANGAR_URL: service.url, HANGAR_PASSWORD: undefined });
    assert.equal(noPassword.code, 2);
    assert.match(noPassword.stderr, /no password: set HANGAR_PASSWORD/);
    const wrong = await hangar(["task-list"], { ...env, HANGAR_PASSWORD: "guess" });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /^hangar task-list: SESSION_AUTHENTICATION_FAILED: root, Authentication failure$/m);
    const nobody = await hangar(["task-list", "--url", "http://127.0.0.1:1"], env);
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /cannot reach the toolstack at http:\/\/127\.0\.0\.1:1/);
    const unknownUser = await hangar(["task-list", "--user", "admin"], env);
    assert.match(unknownUser.stderr, /SESSION_AUTHENTICATION_FAILED: admin/);
    const usage = await hangar(["vdi-snapshot", "--sr", "x", "00000000-0000-0000-0000-000000000000"], env);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--sr is an option of vdi-copy only/);
  });

  test("task-wait: plain progress lines (not a terminal), the result on success; by ref or uuid; --json", async () => {
    const task = await client.call(z.string(), "task.create", "upload", "a client's own task");
    const waiting = hangar(["task-wait", task], env);
    for (const progress of [0.1, 0.4, 0.8]) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await client.call(z.unknown(), "task.set_progress", task, progress);
    }
    await client.call(z.unknown(), "task.set_status", task, "success");
    const run = ok(await waiting);
    assert.equal(run.stdout, "");
    // A line per percent seen (the command may start after the first steps), the rate once it moved.
    const lines = run.stderr.trimEnd().split("\n");
    const percents = lines.map((line) => Number(/^progress (\d+)%(?: \(\d+\.\d %\/s, ETA \d+:\d\d\))?$/.exec(line)?.[1]));
    assert.ok(percents.every((p) => [0, 10, 40, 80].includes(p)), run.stderr);
    assert.deepEqual(percents, [...new Set(percents)].sort((a, b) => a - b), run.stderr);
    assert.match(lines.at(-1)!, /^progress 80% \(\d+\.\d %\/s, ETA \d+:\d\d\)$/);

    const { uuid } = await client.call(zTaskRecord, "task.get_record", task);
    const json = JSON.parse(ok(await hangar(["task-wait", uuid, "--json"], env)).stdout) as Record<string, unknown>;
    assert.equal(json.ref, task);
    assert.equal(json.status, "success");
    assert.equal(json.result, null);
  });

  test("task-wait: a cancelled or failed task exits 1 with its error_info; an unknown one fails", async () => {
    const task = await client.call(z.string(), "task.create", "doomed", "");
    const waiting = hangar(["task-wait", task], env);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await client.call(z.unknown(), "task.cancel", task);
    const run = await waiting;
    assert.equal(run.code, 1);
    assert.match(run.stderr, new RegExp(`^task cancelled: TASK_CANCELLED ${task}$`, "m"));
    const json = await hangar(["task-wait", task, "--json"], env);
    assert.equal(json.code, 1);
    assert.deepEqual((JSON.parse(json.stdout) as { error_info: string[] }).error_info, ["TASK_CANCELLED", task]);
    const unknown = await hangar(["task-wait", "OpaqueRef:no-such-task"], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /HANDLE_INVALID: task, OpaqueRef:no-such-task/);
  });

  test("task-list: oldest first with status and progress; --json gives the records with their refs", async () => {
    const task = await client.call(z.string(), "task.create", "listed task", "");
    await client.call(z.unknown(), "task.set_progress", task, 0.25);
    const table = rows(ok(await hangar(["task-list"], env)).stdout);
    assert.deepEqual(table[0], ["UUID", "NAME", "STATUS", "PROGRESS", "CREATED", "ERROR"]);
    const line = table.find((cells) => cells[1] === "listed task");
    assert.ok(line, JSON.stringify(table));
    assert.deepEqual(line.slice(2, 4), ["pending", "25%"]);
    const listed = JSON.parse(ok(await hangar(["task-list", "--json"], env)).stdout) as Array<{ ref: string; name_label: string; other_config: unknown }>;
    const mine = listed.find((t) => t.ref === task);
    assert.equal(mine?.name_label, "listed task");
    assert.deepEqual(mine?.other_config, {}, "--json prints records whole");
  });
});
