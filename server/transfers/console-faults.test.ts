// Issue 22's fault matrix, its console rows: an upload (tus into the console, imported into the toolstack while it
// arrives) and a download (the console spooling the toolstack's export), each under kill -9 of the console and of
// the toolstack, then a restart of what was killed. The console is its transfer routes in a process of their own
// (console-process.ts, the code its Pages API routes run), the toolstack `hangar serve`; this test is the browser.
// Whatever the pair: the toolstack's task of the cut transfer ends (failed with a reason, never pending — even while
// the console stays dead), the transfer then resumes and completes with the same bytes, every task has ended, the SR
// holds exactly what succeeded, and no daemon is left without an owner (fault-testing.ts).
//
// The other faults of these rows are the import and export rows of fault-matrix.test.ts: an upload is an import of
// the toolstack, a download an export of it, with the same daemons under them. The console killed mid-upload in a
// real browser, which resumes by itself, is e2e/console-restart.spec.ts.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { type IncomingMessage, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { openVolumeData } from "../plugins/filesr/index.ts";
import { isPidRunning } from "../plugins/filesr/liveness.ts";
import { hostProcesses, type Sr, srOf, srProblems, strayProcesses, unfinishedTasks, volumeKeys } from "../toolstack/fault-testing.ts";
import { XenApiClient } from "../toolstack/storage-testing.ts";
import { type ServeProcess, startServeProcess, tempDataDir } from "../toolstack/testing.ts";
import { collect, diskBytes, http, MiB, patternBlock, type TestDisk, testXva } from "../toolstack/transfer/testing.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";
import { type ConsoleProcess, startConsoleProcess } from "./console-process.ts";

// This process reads the console's upload states: its data dir is the console's, set before the modules first use it.
const consoleDir = mkdtempSync(join(tmpdir(), "hangar-console-faults-"));
process.env.HANGAR_DATA_DIR = consoleDir;
process.env.HANGAR_CONSOLE_SECRET ??= "hangar-console-faults-secret";
const { consoleOn } = await import("../api/testing.ts");
const { readState } = await import("./upload/state.ts");

const BOUND_MS = 30_000;

let toolstackDir: string;
let service: ServeProcess;
let port: number;
let client: XenApiClient;
let cookies: Headers;
let sr: Sr;
let expected: Set<string>;
/** A halted VM with 64 MiB of data, to download. */
let exported: { vm: string; uuid: string };
const consoles: ConsoleProcess[] = [];

const call = <T = unknown>(method: string, ...params: unknown[]) => client.call<T>(method, ...params);
const denseDisk = (mib: number, seed: number): TestDisk => ({ size: mib * MiB, blocks: new Map(Array.from({ length: mib }, (_, i) => [i, patternBlock(seed + i)])) });

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (const deadline = Date.now() + BOUND_MS; ; await sleep(50)) {
    const value = await probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, what);
  }
}

async function startToolstack(): Promise<void> {
  service = await startServeProcess(toolstackDir, {}, { port });
  port = Number(new URL(service.url).port);
  client = await XenApiClient.login(service.url.replace(/\/$/, ""));
}

async function killToolstack(): Promise<void> {
  process.kill(service.pid, "SIGKILL");
  await until("hangar serve died", () => (isPidRunning(service.pid) ? undefined : true));
}

async function startConsole(consolePort = 0): Promise<ConsoleProcess> {
  const started = await startConsoleProcess({ HANGAR_DATA_DIR: consoleDir, HANGAR_TOOLSTACK_URL: `http://127.0.0.1:${port}`, HANGAR_CONSOLE_SECRET: process.env.HANGAR_CONSOLE_SECRET! }, consolePort);
  consoles.push(started);
  return started;
}

/** A task's end within the bound; a failure says why in words. */
async function assertEnded(task: string, status: "success" | "failure" | "cancelled", code?: string): Promise<Record<string, unknown>> {
  const record = await client.waitTask(task, BOUND_MS);
  const info = record.error_info as string[];
  assert.equal(record.status, status, `${String(record.name_label)}: ${JSON.stringify(info)}`);
  if (status === "failure") {
    if (code !== undefined) assert.equal(info[0], code, info.join(" "));
    assert.match(info.slice(1).join(" "), /[A-Za-z]{3,} [A-Za-z]{2,} [A-Za-z]{2,}/, "the reason is said in words");
  }
  return record;
}

/** Every task has ended, the SR holds what it should, and the toolstack's host has no daemon without an owner. */
async function assertClean(): Promise<void> {
  assert.deepEqual(await unfinishedTasks(client), [], "every task has ended");
  let problems: string[] = [];
  for (const deadline = Date.now() + BOUND_MS; ; await sleep(250)) {
    problems = [...strayProcesses(toolstackDir, service.pid, [sr.path]), ...(await srProblems(client, sr, expected))];
    if (problems.length === 0 || Date.now() > deadline) break;
  }
  assert.deepEqual(problems, [], "no orphan, no daemon without an owner");
}

async function datasourceBack(): Promise<void> {
  await until("the SR's datasource daemon runs (once)", () => (hostProcesses(toolstackDir).filter((p) => p.kind === "datasource daemon").length === 1 ? true : undefined));
}

// ---------------------------------------------------------------------------------------------------------------
// Uploads, as a browser's tus client sends them.

function tus(consoleUrl: string, method: string, path: string, extra: Record<string, string> = {}, body?: Buffer): Promise<Response> {
  const headers = new Headers(cookies);
  headers.set("tus-resumable", "1.0.0");
  for (const [k, v] of Object.entries(extra)) headers.set(k, v);
  return fetch(`${consoleUrl}/api/upload${path}`, { method, headers, body: body === undefined ? undefined : new Uint8Array(body) });
}

/** An upload of a 24 MiB disk with half its bytes sent, its import reading them. */
async function halfUpload(consoleUrl: string, name: string, seed: number) {
  const disk = denseDisk(24, seed);
  const xva = await collect(testXva({ name, disks: [disk] }));
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  const created = await tus(consoleUrl, "POST", "", { "upload-length": String(xva.length), "upload-metadata": `filename ${b64(`${name}.xva`)},sr ${b64(sr.ref)},lastModified ${b64(String(seed))}` });
  assert.equal(created.status, 201, await created.text());
  const id = created.headers.get("location")!.split("/").pop()!;
  const half = Math.floor(xva.length / 2);
  const sent = await tus(consoleUrl, "PATCH", `/${id}`, { "upload-offset": "0", "content-type": "application/offset+octet-stream" }, xva.subarray(0, half));
  assert.equal(sent.status, 204, await sent.text());
  const task = await until("the upload's import started", async () => (await readState(id))?.task ?? undefined);
  await until("the import reads the upload", async () => ((await call<number>("task.get_progress", task)) > 0 ? true : undefined));
  return { disk, xva, id, task };
}

/** The rest of an upload from where the console's copy ends (tus HEAD, then PATCH); its import's VM once done. */
async function finishUpload(consoleUrl: string, upload: { xva: Buffer; id: string }): Promise<string> {
  const head = await tus(consoleUrl, "HEAD", `/${upload.id}`);
  assert.equal(head.status, 200);
  const offset = Number(head.headers.get("upload-offset"));
  assert.ok(offset > 0 && offset < upload.xva.length, `the console kept what it had (${offset} bytes)`);
  const rest = await tus(consoleUrl, "PATCH", `/${upload.id}`, { "upload-offset": String(offset), "content-type": "application/offset+octet-stream" }, upload.xva.subarray(offset));
  assert.equal(rest.status, 204, await rest.text());
  const state = await until("the upload's import ended", async () => {
    const s = await readState(upload.id);
    return s?.status === "done" || s?.status === "failed" ? s : undefined;
  });
  assert.equal(state.status, "done", state.error ?? "");
  return state.vms[0]!;
}

/** The VM imported with the disk's bytes; its disk is the SR's for good. */
async function assertImported(vm: string, name: string, disk: TestDisk): Promise<void> {
  assert.deepEqual(await call<string[]>("VM.get_by_name_label", name), [vm], "imported once");
  for (const vbd of await call<string[]>("VM.get_VBDs", vm)) {
    if ((await call("VBD.get_type", vbd)) !== "Disk") continue;
    const key = await call<string>("VDI.get_location", await call<string>("VBD.get_VDI", vbd));
    const volume = await openVolumeData(sr.path, key, { readOnly: true });
    const bytes = Buffer.alloc(disk.size);
    await volume.read(0, bytes);
    await volume.close();
    assert.ok(bytes.equals(diskBytes(disk)), "the disk's bytes");
    expected.add(key);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Downloads, as a browser (or curl -C -) fetches them: the first bytes, then the rest with Range + If-Range.

interface Started {
  response: IncomingMessage;
  etag: string;
}

/** A download the console has answered; then held by the console stopped (SIGSTOP), the export under way. */
async function startDownload(console: ConsoleProcess, task: string): Promise<Started> {
  const response = await new Promise<IncomingMessage>((resolve, reject) =>
    request(`${console.url}/api/download/vm/${exported.uuid}.xva?compression=none&task=${encodeURIComponent(task)}`, { headers: { cookie: cookies.get("cookie")! } }, (answer) => {
      // Everything stops at once: the console reads no more of the toolstack's export, which waits with its disk plugged.
      process.kill(console.pid, "SIGSTOP");
      answer.pause();
      resolve(answer);
    })
      .on("error", reject)
      .end(),
  );
  assert.equal(response.statusCode, 200);
  const progress = await call<number>("task.get_progress", task);
  assert.ok(progress < 1, `the export is under way (progress ${progress})`);
  return { response, etag: String(response.headers.etag) };
}

/** What the download got before it broke (the body never ends as if whole), and the rest resumed from the console. */
async function resumeDownload(consoleUrl: string, started: Started): Promise<void> {
  const { got, ended } = await new Promise<{ got: Buffer; ended: boolean }>((resolve) => {
    const chunks: Buffer[] = [];
    let ended = false;
    started.response.on("data", (chunk: Buffer) => chunks.push(chunk));
    started.response.on("end", () => (ended = true));
    started.response.on("error", () => undefined);
    started.response.on("close", () => resolve({ got: Buffer.concat(chunks), ended }));
    started.response.resume();
  });
  assert.equal(ended, false, "the cut download never ends as if whole");
  // Node sends the answer's headers with its first bytes: some arrived before the console stopped.
  assert.ok(got.length > 0, "the download was cut mid-way");
  const rest = await http(`${consoleUrl}/api/download/vm/${exported.uuid}.xva?compression=none`, { headers: { cookie: cookies.get("cookie")!, range: `bytes=${got.length}-`, "if-range": started.etag } });
  // Before: 200 and the whole of a new export, the ETag refused as "the VM changed" when only its SR's space had.
  assert.equal(rest.status, 206, `resumed, not made again: ${rest.body.subarray(0, 200).toString()}`);
  const whole = await http(`${service.url}export?session_id=${client.session}&uuid=${exported.uuid}&use_compression=false&offset=0&etag=${encodeURIComponent(started.etag)}`);
  assert.equal(whole.status, 200);
  assert.equal(rest.headers["content-range"], `bytes ${got.length}-${whole.body.length - 1}/${whole.body.length}`);
  assert.ok(Buffer.concat([got, rest.body]).equals(whole.body), "the resumed download is the export, byte for byte");
}

/** Life goes on while the download waits: another VM comes into the SR (its space figures change, not the VM's). */
async function anotherVmMeanwhile(): Promise<void> {
  const archive = await collect(testXva({ name: "meanwhile", disks: [denseDisk(4, 700)] }));
  const answer = await http(`${service.url}import?session_id=${client.session}`, { method: "PUT", body: archive, headers: { "content-length": String(archive.length) } });
  const record = await client.waitTask(String(answer.headers["task-id"]));
  assert.equal(record.status, "success", JSON.stringify(record.error_info));
  const [vm] = parseXmlRpcValue(String(record.result)) as string[];
  for (const vbd of await call<string[]>("VM.get_VBDs", vm)) {
    if ((await call("VBD.get_type", vbd)) === "Disk") expected.add(await call<string>("VDI.get_location", await call<string>("VBD.get_VDI", vbd)));
  }
  await call("SR.scan", sr.ref);
}

async function assertDiskReleased(): Promise<void> {
  for (const vbd of await call<string[]>("VM.get_VBDs", exported.vm)) {
    if ((await call("VBD.get_type", vbd)) === "Disk") assert.deepEqual(await call("VDI.get_current_operations", await call<string>("VBD.get_VDI", vbd)), {});
  }
}

describe("console transfers under kill -9, then restart", { timeout: 10 * 60_000 }, () => {
  before(async () => {
    toolstackDir = await tempDataDir();
    port = 0;
    await startToolstack();
    cookies = (await consoleOn(`http://127.0.0.1:${port}`)).headers;
    sr = await srOf(client, await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]));
    const archive = await collect(testXva({ name: "download me", disks: [denseDisk(64, 900)] }));
    const answer = await http(`${service.url}import?session_id=${client.session}`, { method: "PUT", body: archive, headers: { "content-length": String(archive.length) } });
    const [vm] = parseXmlRpcValue(String((await client.waitTask(String(answer.headers["task-id"]))).result)) as string[];
    exported = { vm: vm!, uuid: await call<string>("VM.get_uuid", vm) };
    expected = volumeKeys(sr.path);
    await assertClean();
  });

  after(async () => {
    for (const console of consoles) await console.kill().catch(() => undefined);
    await service.stop();
    rmSync(toolstackDir, { recursive: true, force: true });
    rmSync(consoleDir, { recursive: true, force: true });
  });

  test("upload × kill -9 of the console: the toolstack's import fails with the console gone; the upload resumes on the next console and imports", async (t) => {
    const first = await startConsole();
    const upload = await halfUpload(first.url, "upload, console killed", 100);
    await first.kill();
    // No console comes back yet: the import whose bytes came through the dead console's connection ends.
    const cut = await assertEnded(upload.task, "failure");
    t.diagnostic(`the cut import: ${JSON.stringify(cut.error_info)}`);
    assert.deepEqual(await call("VM.get_by_name_label", "upload, console killed"), [], "its half-made VM removed");
    await assertClean();
    const second = await startConsole(Number(new URL(first.url).port));
    try {
      await assertImported(await finishUpload(second.url, upload), "upload, console killed", upload.disk);
      await assertClean();
    } finally {
      await second.kill();
    }
  });

  test("upload × kill -9 of the toolstack: the next start fails the cut import TASK_INTERRUPTED; the console imports again from its spool", async () => {
    const console = await startConsole();
    try {
      const upload = await halfUpload(console.url, "upload, toolstack killed", 200);
      await killToolstack();
      await startToolstack();
      await datasourceBack();
      await assertEnded(upload.task, "failure", "TASK_INTERRUPTED");
      await assertImported(await finishUpload(console.url, upload), "upload, toolstack killed", upload.disk);
      await assertClean();
    } finally {
      await console.kill();
    }
  });

  test("download × kill -9 of the console: the toolstack's export ends and releases the disk; the download resumes on the next console, byte for byte", async () => {
    const first = await startConsole();
    const task = await call<string>("task.create", "download, console killed", "");
    const started = await startDownload(first, task);
    await first.kill();
    // The toolstack takes its client going away as the export's cancel (toolstack/transfer/routes.ts).
    await assertEnded(task, "cancelled");
    await assertDiskReleased();
    await assertClean();
    await anotherVmMeanwhile();
    const second = await startConsole(Number(new URL(first.url).port));
    try {
      await resumeDownload(second.url, started);
      await assertClean();
    } finally {
      await second.kill();
    }
  });

  test("download × kill -9 of the toolstack: the download is cut, the next start fails the export TASK_INTERRUPTED; it resumes from the new run, byte for byte", async () => {
    const console = await startConsole();
    try {
      const task = await call<string>("task.create", "download, toolstack killed", "");
      const started = await startDownload(console, task);
      await killToolstack();
      process.kill(console.pid, "SIGCONT");
      await startToolstack();
      await datasourceBack();
      await assertEnded(task, "failure", "TASK_INTERRUPTED");
      await assertDiskReleased();
      await anotherVmMeanwhile();
      await resumeDownload(console.url, started);
      await assertClean();
    } finally {
      await console.kill();
    }
  });
});
