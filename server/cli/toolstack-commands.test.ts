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
import { XenApiClient, zTaskRecord } from "../xenapi/client.ts";

const HANGAR = fileURLToPath(new URL("../../bin/hangar", import.meta.url));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs bin/hangar; `onStderr` sees its stderr so far as it grows. */
function hangar(args: string[], env: Record<string, string | undefined> = {}, onStderr: (text: string) => void = () => undefined): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(HANGAR, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (text: string) => (stdout += text));
    child.stderr.setEncoding("utf8").on("data", (text: string) => onStderr((stderr += text)));
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
    let following!: () => void;
    const started = new Promise<void>((resolve) => (following = resolve));
    const waiting = hangar(["task-wait", task], env, (text) => text.includes("progress 0%") && following());
    await started;
    for (const progress of [0.1, 0.4, 0.8]) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      await client.call(z.unknown(), "task.set_progress", task, progress);
    }
    await client.call(z.unknown(), "task.set_status", task, "success");
    const run = ok(await waiting);
    assert.equal(run.stdout, "");
    // A line per percent seen, with the rate once the progress moved.
    const lines = run.stderr.trimEnd().split("\n");
    assert.equal(lines[0], "progress 0%");
    assert.match(lines.at(-1)!, /^progress 80% \(\d+\.\d %\/s, ETA \d+:\d\d\)$/);
    const percents = lines.map((line) => Number(/^progress (\d+)%(?: \(\d+\.\d %\/s, ETA \d+:\d\d\))?$/.exec(line)?.[1]));
    // Each step once, in order (two steps may come in one event batch: then only the later shows).
    assert.deepEqual(percents, [0, 10, 40, 80].filter((p) => percents.includes(p)), run.stderr);

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

describe("hangar serve and root's password", () => {
  test("without HANGAR_ROOT_PASSWORD the first start prints a generated one, once; later starts keep it", async (t) => {
    const dataDir = await tempDataDir();
    const running: ServeProcess[] = [];
    t.after(async () => {
      for (const serve of running) await serve.stop();
      await rm(dataDir, { recursive: true, force: true });
    });
    const first = await startServeProcess(dataDir, { HANGAR_ROOT_PASSWORD: undefined });
    running.push(first);
    const password = /^root password \(shown once, stored hashed; set HANGAR_ROOT_PASSWORD to choose one\): (\S+)$/m.exec(first.banner)?.[1];
    assert.ok(password, first.banner);
    ok(await hangar(["task-list"], { HANGAR_URL: first.url, HANGAR_PASSWORD: password }));
    await first.stop();
    const second = await startServeProcess(dataDir, { HANGAR_ROOT_PASSWORD: undefined });
    running.push(second);
    assert.doesNotMatch(second.banner, /root password/);
    ok(await hangar(["task-list"], { HANGAR_URL: second.url, HANGAR_PASSWORD: password }));
  });
});

describe("hangar SR, VDI and VM commands", () => {
  const GiB = 1024 ** 3;
  let second: string;
  let disk: { ref: string; uuid: string };

  before(async () => {
    const host = (await client.call(z.array(z.string()), "host.get_all"))[0]!;
    second = await client.call(z.string(), "SR.create", host, { path: `${service.dataDir}/second-sr` }, "0", "second", "made by the test", "file", "user", false, {});
    const ref = await client.call(z.string(), "VDI.create", { SR: second, virtual_size: 2 * GiB, name_label: "data disk", type: "user" });
    disk = { ref, uuid: await client.call(z.string(), "VDI.get_uuid", ref) };
  });

  test("sr-list: the default SR and the one made; --json records whole", async () => {
    const table = rows(ok(await hangar(["sr-list"], env)).stdout);
    assert.deepEqual(table[0], ["UUID", "NAME", "TYPE", "SIZE", "USED", "VDIS", "HEALTH"]);
    const byName = new Map(table.slice(1).map((cells) => [cells[1], cells]));
    assert.equal(byName.get("Local storage")?.[2], "file");
    assert.equal(byName.get("second")?.[6], "Healthy");
    assert.match(byName.get("second")![3]!, /^\d+(\.\d)? [KMGTP]?i?B$/);
    const json = JSON.parse(ok(await hangar(["sr-list", "--json"], env)).stdout) as Array<{ ref: string; name_label: string; PBDs: string[] }>;
    assert.equal(json.find((sr) => sr.ref === second)?.PBDs.length, 1);
  });

  test("vdi-list: every VDI, or those of one SR by name or uuid", async () => {
    const table = rows(ok(await hangar(["vdi-list"], env)).stdout);
    assert.deepEqual(table[0], ["UUID", "NAME", "SR", "SIZE", "USED", "TYPE", "FLAGS"]);
    const line = table.find((cells) => cells[0] === disk.uuid);
    assert.deepEqual(line?.slice(1, 4), ["data disk", "second", "2 GiB"]);
    const srUuid = await client.call(z.string(), "SR.get_uuid", second);
    for (const sr of ["second", srUuid]) {
      const listed = JSON.parse(ok(await hangar(["vdi-list", "--sr", sr, "--json"], env)).stdout) as Array<{ SR: string }>;
      assert.ok(listed.length >= 1 && listed.every((vdi) => vdi.SR === second), sr);
    }
    const none = await hangar(["vdi-list", "--sr", "no such SR"], env);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no SR named "no such SR"/);
  });

  test("vm-list: name, power state, VCPUs, memory, disks", async () => {
    const vm = await client.call(z.string(), "VM.create", { name_label: "listed vm", VCPUs_max: 2, VCPUs_at_startup: 2 });
    const table = rows(ok(await hangar(["vm-list"], env)).stdout);
    assert.deepEqual(table[0], ["UUID", "NAME", "POWER", "VCPUS", "MEMORY", "VBDS"]);
    assert.deepEqual(table.find((cells) => cells[1] === "listed vm")?.slice(2), ["Halted", "2", "1 GiB", "0"]);
    const json = JSON.parse(ok(await hangar(["vm-list", "--json"], env)).stdout) as Array<{ ref: string }>;
    assert.ok(json.some((record) => record.ref === vm));
  });

  test("vdi-snapshot, vdi-clone, vdi-copy print the new VDI's uuid; vdi-destroy removes it", async () => {
    const snapshot = ok(await hangar(["vdi-snapshot", disk.uuid], env)).stdout.trim();
    const clone = ok(await hangar(["vdi-clone", disk.uuid], env)).stdout.trim();
    const copy = ok(await hangar(["vdi-copy", disk.uuid, "--sr", "Local storage"], env));
    const made = { snapshot, clone, copy: copy.stdout.trim() };
    for (const uuid of Object.values(made)) assert.match(uuid, /^[0-9a-f-]{36}$/);
    assert.match(copy.stderr, /^progress \d+%/m, "the copy's progress, plain");
    const listed = JSON.parse(ok(await hangar(["vdi-list", "--json"], env)).stdout) as Array<{ uuid: string; SR: string; is_a_snapshot: boolean; virtual_size: number }>;
    const find = (uuid: string) => listed.find((vdi) => vdi.uuid === uuid);
    assert.equal(find(made.snapshot)?.is_a_snapshot, true);
    assert.equal(find(made.clone)?.SR, second);
    assert.notEqual(find(made.copy)?.SR, second);
    assert.equal(find(made.copy)?.virtual_size, 2 * GiB);
    for (const uuid of Object.values(made)) assert.equal(ok(await hangar(["vdi-destroy", uuid], env)).stdout, "");
    const after = JSON.parse(ok(await hangar(["vdi-list", "--json"], env)).stdout) as Array<{ uuid: string }>;
    assert.ok(!after.some((vdi) => Object.values(made).includes(vdi.uuid)));
  });

  test("--json and --no-wait: the task and the new VDI; the task ref to follow with task-wait", async () => {
    const json = JSON.parse(ok(await hangar(["vdi-clone", disk.uuid, "--json"], env)).stdout) as { task: { ref: string; status: string; name_label: string }; vdi: { ref: string; uuid: string } };
    assert.equal(json.task.status, "success");
    assert.equal(json.task.name_label, "Async.VDI.clone");
    assert.equal(await client.call(z.string(), "VDI.get_uuid", json.vdi.ref), json.vdi.uuid);
    const task = ok(await hangar(["vdi-destroy", json.vdi.uuid, "--no-wait"], env)).stdout.trim();
    assert.match(task, /^OpaqueRef:/);
    ok(await hangar(["task-wait", task], env));
    const noWaitJson = JSON.parse(ok(await hangar(["vdi-snapshot", disk.uuid, "--no-wait", "--json"], env)).stdout) as { task: string };
    const done = JSON.parse(ok(await hangar(["task-wait", noWaitJson.task, "--json"], env)).stdout) as { status: string; result: string };
    assert.equal(done.status, "success");
    assert.match(done.result, /^OpaqueRef:/, "task-wait decodes the result");
  });

  test("a failing operation exits 1 with the task's error_info: destroying a disk a VM uses", async () => {
    const vm = await client.call(z.string(), "VM.create", { name_label: "user of the disk" });
    await client.call(z.string(), "VBD.create", { VM: vm, VDI: disk.ref, type: "Disk", mode: "RW" });
    const run = await hangar(["vdi-destroy", disk.uuid], env);
    assert.equal(run.code, 1);
    assert.match(run.stderr, new RegExp(`^task failure: VDI_IN_USE ${disk.ref} destroy$`, "m"));
    const unknown = await hangar(["vdi-snapshot", "00000000-0000-4000-8000-000000000000"], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /UUID_INVALID: VDI, 00000000-0000-4000-8000-000000000000/);
  });
});
