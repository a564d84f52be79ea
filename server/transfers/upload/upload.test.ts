// The upload pipeline against a real toolstack: tus requests as the route handler receives them, the import
// running while the bytes arrive, a broken import stream restarted from the spool, and the refusals.
import assert from "node:assert/strict";
import { mkdtempSync, existsSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test, type TestContext } from "node:test";
import { z } from "zod";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-upload-test-"));
process.env.HANGAR_DATA_DIR = dataDir;
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }));

const { startConsoleUnderTest } = await import("../../api/testing.ts");
const { collect, MiB, patternBlock, readVdi, testXva } = await import("../../toolstack/transfer/testing.ts");
const { serveUploads } = await import("./testing.ts");
const { readState, spoolFile } = await import("./state.ts");
const { cancelPipeline } = await import("./pipeline.ts");
const { dropConsoleProcess } = await import("../testing.ts");
// The spool stays in this test's dir (each test toolstack points HANGAR_DATA_DIR at its own, removed after it).
(await import("./state.ts")).uploadSpoolDir();
type ConsoleUnderTest = Awaited<ReturnType<typeof startConsoleUnderTest>>;

const { url: BASE } = await serveUploads();

function tusRequest(method: string, url: string, headers: Headers | undefined, extra: Record<string, string> = {}, body?: Buffer): Promise<Response> {
  const h = new Headers(headers);
  h.set("tus-resumable", "1.0.0");
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  return fetch(url, { method, headers: h, body: body === undefined ? undefined : new Uint8Array(body) });
}

async function debugState() {
  const { allStates } = await import("./state.ts");
  return (await allStates()).map((s) => ({ ...s, session: undefined }));
}

const b64 = (s: string) => Buffer.from(s).toString("base64");

async function defaultSr(cu: ConsoleUnderTest): Promise<string> {
  const [pool] = await cu.xapi.call(z.array(z.string()), "pool.get_all");
  return cu.xapi.call(z.string(), "pool.get_default_SR", pool);
}

async function createUpload(cu: ConsoleUnderTest, name: string, length: number, headers: Headers | undefined = cu.headers, lastModified = Date.now()): Promise<Response> {
  const sr = await defaultSr(cu);
  return tusRequest("POST", BASE, headers, { "upload-length": String(length), "upload-metadata": `filename ${b64(name)},sr ${b64(sr)},lastModified ${b64(String(lastModified))}` });
}

const started: string[] = [];
/** Pipelines still running when a test ends are cancelled (their toolstack is about to stop). */
test.afterEach(async () => {
  for (const id of started.splice(0)) await cancelPipeline(id);
});

function uploadId(response: Response): string {
  const location = response.headers.get("location");
  assert.ok(location, `no Location (HTTP ${response.status})`);
  const id = location.split("/").pop()!;
  started.push(id);
  return id;
}

async function patch(cu: ConsoleUnderTest, id: string, offset: number, bytes: Buffer): Promise<Response> {
  const response = await tusRequest("PATCH", `${BASE}/${id}`, cu.headers, { "upload-offset": String(offset), "content-type": "application/offset+octet-stream" }, bytes);
  return response;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(await debugState())}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The upload's state once its import has ended (done or failed). */
function importEnded(id: string) {
  return until("the import to finish", async () => {
    const s = await readState(id);
    return s?.status === "done" || s?.status === "failed" ? s : undefined;
  });
}

async function disksOf(cu: ConsoleUnderTest, vm: string): Promise<string[]> {
  const vbds = await cu.xapi.call(z.array(z.string()), "VM.get_VBDs", vm);
  const disks: string[] = [];
  for (const vbd of vbds) if ((await cu.xapi.call(z.string(), "VBD.get_type", vbd)) === "Disk") disks.push(await cu.xapi.call(z.string(), "VBD.get_VDI", vbd));
  return disks;
}

async function vmNamed(cu: ConsoleUnderTest, name: string): Promise<string[]> {
  return cu.xapi.call(z.array(z.string()), "VM.get_by_name_label", name);
}

function testDisk() {
  const blocks = new Map<number, Buffer>();
  for (const i of [0, 3, 7, 12, 15]) blocks.set(i, patternBlock(i + 100));
  return { size: 16 * MiB, blocks };
}

/** An upload of a test VM's archive with its first half sent: the disk, the archive, the upload and where it stands. */
async function halfUploaded(cu: ConsoleUnderTest, vmName: string, fileName: string) {
  const disk = testDisk();
  const xva = await collect(testXva({ name: vmName, disks: [disk] }));
  const id = uploadId(await createUpload(cu, fileName, xva.length));
  const half = Math.floor(xva.length / 2);
  assert.equal((await patch(cu, id, 0, xva.subarray(0, half))).status, 204);
  return { disk, xva, id, half };
}

/** A TCP relay between the console and the toolstack whose connections a test can cut (a network fault). */
async function relay(t: TestContext, target: number): Promise<{ url: string; cut(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(target, "127.0.0.1");
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, cut: () => { for (const s of sockets) s.destroy(); } };
}

test("an upload in several PATCHes is imported while it arrives, with the same disk bytes", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const disk = testDisk();
  const xva = await collect(testXva({ name: "uploaded while importing", disks: [disk] }));
  const created = await createUpload(cu, "web.xva", xva.length);
  assert.equal(created.status, 201, await created.clone().text());
  const id = uploadId(created);
  const cut = Math.floor(xva.length / 4);
  let offset = 0;
  for (let part = 0; part < 4; part++) {
    const end = part === 3 ? xva.length : offset + cut;
    if (part === 3) {
      // Before the last byte: the import task exists and runs, fed from the spool.
      const state = await until("the import task", async () => ((await readState(id))?.task ? await readState(id) : undefined));
      const status = await cu.xapi.call(z.string(), "task.get_status", state.task);
      assert.equal(status, "pending");
    }
    const answer = await patch(cu, id, offset, xva.subarray(offset, end));
    assert.equal(answer.status, 204, await answer.text());
    offset = end;
  }
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal(done.attempts, 1);
  const [vm] = done.vms;
  assert.ok(vm);
  assert.equal(await cu.xapi.call(z.string(), "VM.get_name_label", vm), "uploaded while importing");
  const [vdi] = await disksOf(cu, vm);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
  // The transfers router shows it, as the UI does.
  const listed = await cu.caller.transfers.uploads({ ids: [id] });
  assert.equal(listed.uploads[0]?.status, "done");
  assert.equal(listed.uploads[0]?.task?.status, "success");
});

test("a broken import stream is restarted from the spool without the browser", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const net = await relay(t, cu.toolstack.service.httpPort);
  process.env.HANGAR_TOOLSTACK_URL = net.url;
  const disk = testDisk();
  const xva = await collect(testXva({ name: "survives a broken stream", disks: [disk] }));
  const id = uploadId(await createUpload(cu, "broken.xva", xva.length));
  const half = Math.floor(xva.length / 2);
  assert.equal((await patch(cu, id, 0, xva.subarray(0, half))).status, 204);
  const first = await until("the first import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  await new Promise((r) => setTimeout(r, 300));
  net.cut();
  const second = await until("a second import", async () => {
    const s = await readState(id);
    return s !== undefined && s.attempts >= 2 ? s : undefined;
  });
  assert.notEqual(second.task, first.task);
  assert.equal((await patch(cu, id, half, xva.subarray(half))).status, 204);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal((await vmNamed(cu, "survives a broken stream")).length, 1, "one VM: the broken import was undone");
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", first.task), "pending");
});

test("an upload paused for longer than the toolstack's body idle timeout goes on when resumed, imported once", async (t) => {
  process.env.HANGAR_BODY_IDLE_TIMEOUT = "1";
  t.after(() => delete process.env.HANGAR_BODY_IDLE_TIMEOUT);
  const cu = await startConsoleUnderTest(t);
  const { disk, xva, id, half } = await halfUploaded(cu, "paused a while", "paused.xva");
  const first = await until("the first import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  // The toolstack gives up on the stalled body after 1 s; the console must not take that for the archive's fault.
  await until("the first import to end", async () => ((await cu.xapi.call(z.string(), "task.get_status", first.task)) === "pending" ? undefined : true));
  await new Promise((r) => setTimeout(r, 6000));
  assert.equal((await readState(id))?.status, "importing", "still importing, not failed");
  assert.equal((await patch(cu, id, half, xva.subarray(half))).status, 204);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal((await vmNamed(cu, "paused a while")).length, 1);
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
});

test("a file that is no VM archive fails with a message and leaves nothing behind", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const vdisBefore = (await cu.xapi.call(z.array(z.string()), "VDI.get_all")).length;
  const vmsBefore = (await cu.xapi.call(z.array(z.string()), "VM.get_all")).length;
  const junk = Buffer.alloc(3 * MiB, "this is not an XVA archive\n");
  const id = uploadId(await createUpload(cu, "junk.xva", junk.length));
  await patch(cu, id, 0, junk.subarray(0, MiB));
  const failed = await until("the refusal", async () => {
    const s = await readState(id);
    return s?.status === "failed" ? s : undefined;
  });
  assert.match(failed.error ?? "", /\w+ \w+/);
  assert.doesNotMatch(failed.error ?? "", /at .*\.ts:\d+/, "words, not a stack");
  // The browser's next PATCH gets the reason.
  const next = await patch(cu, id, MiB, junk.subarray(MiB));
  assert.equal(next.status, 422);
  assert.equal((await next.text()).trim(), failed.error);
  await until("the spool to go", async () => (existsSync(spoolFile(id)) ? undefined : true));
  assert.equal((await cu.xapi.call(z.array(z.string()), "VDI.get_all")).length, vdisBefore);
  assert.equal((await cu.xapi.call(z.array(z.string()), "VM.get_all")).length, vmsBefore);
});

test("refusals before any byte: anonymous, larger than the SR's free space, not a file the console imports", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const anonymous = await createUpload(cu, "web.xva", 1024, new Headers());
  assert.equal(anonymous.status, 401);
  assert.match(await anonymous.text(), /Log in/);
  const huge = await createUpload(cu, "huge.xva", 1024 ** 5);
  assert.equal(huge.status, 413);
  assert.match(await huge.text(), /larger than the free space/);
  const wrongName = await createUpload(cu, "notes.txt", 1024);
  assert.equal(wrongName.status, 415);
  assert.match(await wrongName.text(), /not a file the console imports/);
  const head = await tusRequest("HEAD", `${BASE}/0123456789abcdef`, new Headers());
  assert.equal(head.status, 401);
});

test("a PATCH cut mid-body keeps the bytes that arrived; a stale offset gets 409; the rest completes the import", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const disk = testDisk();
  const xva = await collect(testXva({ name: "cut mid-body", disks: [disk] }));
  const id = uploadId(await createUpload(cu, "cut.xva", xva.length));
  // A browser's PATCH of the whole file whose connection drops after 3 MiB and a bit (not a block boundary).
  const sent = 3 * MiB + 1234;
  const offsetNow = async () => Number((await tusRequest("HEAD", `${BASE}/${id}`, cu.headers)).headers.get("upload-offset"));
  await new Promise<void>((resolve, reject) => {
    const request = httpRequest(`${BASE}/${id}`, { method: "PATCH", headers: { cookie: cu.headers.get("cookie")!, "tus-resumable": "1.0.0", "upload-offset": "0", "content-type": "application/offset+octet-stream", "content-length": String(xva.length) } });
    request.on("error", () => undefined);
    request.write(xva.subarray(0, sent), (error) => {
      if (error) return reject(error);
      // The bytes reach the console before the connection goes.
      setTimeout(() => {
        request.destroy();
        resolve();
      }, 300);
    });
  });
  assert.equal(await until("the cut PATCH's bytes in the spool", async () => ((await offsetNow()) === sent ? sent : undefined)), sent);
  const stale = await patch(cu, id, 0, xva.subarray(0, MiB));
  assert.equal(stale.status, 409, "an offset the spool is not at is refused");
  assert.equal(await offsetNow(), sent, "and it changed nothing");
  assert.equal((await patch(cu, id, sent, xva.subarray(sent))).status, 204);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
});

test("the console's disk failing under an upload fails it in words, and leaves nothing behind", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const { xva, id, half } = await halfUploaded(cu, "disk full", "full.xva");
  await until("the import to run", async () => ((await readState(id))?.task ? true : undefined));
  // The disk fills: every spool write from now on fails as the kernel says so.
  const { SpoolWriter } = await import("../block-spool.ts");
  const write = SpoolWriter.prototype.write;
  SpoolWriter.prototype.write = () => Promise.reject(Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" }));
  t.after(() => void (SpoolWriter.prototype.write = write));
  // Answered 500 with the reason, or cut (the body was not read to its end): the browser would retry.
  await patch(cu, id, half, xva.subarray(half)).catch(() => undefined);
  const failed = await importEnded(id);
  assert.equal(failed.status, "failed");
  assert.match(failed.error ?? "", /could not keep the upload on its disk \(its disk is full\); upload the file again/);
  // The browser's next request hears why; the import's task ended and undid what it made.
  assert.equal((await tusRequest("HEAD", `${BASE}/${id}`, cu.headers)).status, 422);
  const again = await patch(cu, id, half, xva.subarray(half));
  assert.equal(again.status, 422);
  assert.match(await again.text(), /its disk is full/);
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", failed.task), "pending");
  await until("the spool removed", async () => (existsSync(spoolFile(id)) ? undefined : true));
  // An upload reads "failed" once its import is undone: the VM it had made is gone by then.
  assert.deepEqual(await vmNamed(cu, "disk full"), []);
});

test("after a console restart, the browser's resume starts the import again from the spool", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const { disk, xva, id, half } = await halfUploaded(cu, "survives a console restart", "restart.xva");
  const first = await until("the first import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  // The toolstack takes its time undoing the cut import (a loaded host): the new import waits for it.
  const { TransferState } = await import("../../toolstack/transfer/transfer-state.ts");
  const undo = TransferState.prototype.undo;
  TransferState.prototype.undo = async function (this: InstanceType<typeof TransferState>) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    return undo.call(this);
  };
  t.after(() => void (TransferState.prototype.undo = undo));
  // The console process goes away (its imports stop mid-stream, what is on disk stays): the in-process
  // registry is dropped without a word to the toolstack, as a crash would.
  dropConsoleProcess();
  // The browser comes back: tus asks for the offset, then sends the rest.
  const head = await tusRequest("HEAD", `${BASE}/${id}`, cu.headers);
  assert.equal(head.status, 200);
  assert.equal(head.headers.get("upload-offset"), String(half));
  assert.equal((await patch(cu, id, half, xva.subarray(half))).status, 204);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal((await vmNamed(cu, "survives a console restart")).length, 1, "one VM: the cut import was undone");
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", first.task), "pending");
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
});

test("one import per upload: a second tab resuming the same upload does not start another", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const disk = testDisk();
  const xva = await collect(testXva({ name: "two tabs", disks: [disk] }));
  const id = uploadId(await createUpload(cu, "tabs.xva", xva.length));
  const half = Math.floor(xva.length / 2);
  assert.equal((await patch(cu, id, 0, xva.subarray(0, half))).status, 204);
  const first = await until("the import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  // The other tab (same fingerprint: same upload URL) asks for the offset and sends the rest.
  assert.equal((await tusRequest("HEAD", `${BASE}/${id}`, cu.headers)).status, 200);
  assert.equal((await patch(cu, id, half, xva.subarray(half))).status, 204);
  const done = await until("the import to finish", async () => {
    const s = await readState(id);
    return s?.status === "done" ? s : undefined;
  });
  assert.equal(done.task, first.task, "the same import, not a second one");
  assert.equal((await vmNamed(cu, "two tabs")).length, 1);
});

test("ended uploads are cleaned up after the retention (HANGAR_TRANSFER_RETENTION_S)", async (t) => {
  const { sweepUploads } = await import("./tus.ts");
  const { allStates } = await import("./state.ts");
  const cu = await startConsoleUnderTest(t);
  const junk = Buffer.alloc(MiB, "not an archive\n");
  const id = uploadId(await createUpload(cu, "old.xva", junk.length));
  await patch(cu, id, 0, junk);
  await until("the refusal", async () => ((await readState(id))?.status === "failed" ? true : undefined));
  process.env.HANGAR_TRANSFER_RETENTION_S = "60";
  process.env.HANGAR_TRANSFER_MIN_FREE_MB = "0";
  t.after(() => {
    delete process.env.HANGAR_TRANSFER_RETENTION_S;
    delete process.env.HANGAR_TRANSFER_MIN_FREE_MB;
  });
  await sweepUploads(Date.now());
  assert.ok(await readState(id), "kept within the retention");
  // The disk running low removes ended uploads whatever their age.
  const young = uploadId(await createUpload(cu, "young.xva", junk.length));
  await patch(cu, young, 0, junk);
  await until("the refusal", async () => ((await readState(young))?.status === "failed" ? true : undefined));
  process.env.HANGAR_TRANSFER_MIN_FREE_MB = String(2 ** 40);
  await sweepUploads(Date.now());
  assert.equal(await readState(young), undefined, "removed: the disk is low");
  process.env.HANGAR_TRANSFER_MIN_FREE_MB = "0";
  await sweepUploads(Date.now() + 61_000);
  assert.equal(await readState(id), undefined);
  assert.ok((await allStates()).every((s) => s.status === "uploading" || s.status === "importing"), "every ended upload older than the retention is gone");
  assert.equal(existsSync(spoolFile(id)), false);
});

test("the same file started again elsewhere while its upload runs is refused in words (one import per file)", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const xva = await collect(testXva({ name: "twice", disks: [testDisk()] }));
  const modified = Date.now() - 5000;
  const id = uploadId(await createUpload(cu, "twice.xva", xva.length, cu.headers, modified));
  assert.equal((await patch(cu, id, 0, xva.subarray(0, MiB))).status, 204);
  await until("the import", async () => ((await readState(id))?.task ? true : undefined));
  const again = await createUpload(cu, "twice.xva", xva.length, cu.headers, modified);
  assert.equal(again.status, 409);
  assert.match(await again.text(), /already being uploaded/);
});

test("cancel (tus DELETE) stops the import: the task ends, the toolstack undoes it, the spool goes", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const xva = await collect(testXva({ name: "cancelled import", disks: [testDisk()] }));
  const id = uploadId(await createUpload(cu, "cancel.xva", xva.length));
  assert.equal((await patch(cu, id, 0, xva.subarray(0, 2 * MiB))).status, 204);
  const running = await until("the import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  const answer = await tusRequest("DELETE", `${BASE}/${id}`, cu.headers);
  assert.equal(answer.status, 204);
  const cancelled = await until("the cancel", async () => ((await readState(id))?.status === "cancelled" ? true : undefined));
  assert.ok(cancelled);
  await until("the task to end", async () => ((await cu.xapi.call(z.string(), "task.get_status", running.task)) === "pending" ? undefined : true));
  await until("the VM to be undone", async () => ((await vmNamed(cu, "cancelled import")).length === 0 ? true : undefined));
  assert.equal(existsSync(spoolFile(id)), false);
  const after = await patch(cu, id, 2 * MiB, xva.subarray(2 * MiB));
  assert.ok(after.status === 404 || after.status === 410, `HTTP ${after.status}`);
});

test("a logout mid-import: the import waits in words, and goes on in the session of the user's next login, imported once", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const { logIn, SESSION_COOKIE } = await import("../../auth/session.ts");
  const { createCaller } = await import("../../api/root.ts");
  const { createTRPCContext } = await import("../../api/trpc.ts");
  const disk = testDisk();
  const xva = await collect(testXva({ name: "outlives a logout", disks: [disk] }));
  const id = uploadId(await createUpload(cu, "logout.xva", xva.length));
  const half = Math.floor(xva.length / 2);
  assert.equal((await patch(cu, id, 0, xva.subarray(0, half))).status, 204);
  const { task } = await until("the import task", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  await until("the import to read the first bytes", async () => ((await cu.xapi.call(z.number(), "task.get_progress", task)) > 0 ? true : undefined));
  // Logged out in another tab: the stream already open goes on, but nothing else works in that session.
  await cu.xapi.logout();
  assert.equal((await patch(cu, id, half, xva.subarray(half))).status, 204);
  const waiting = await until("the import to wait for a login", async () => {
    const s = await readState(id);
    return s?.error?.startsWith("Waiting") ? s : undefined;
  });
  assert.equal(waiting.status, "importing");
  assert.match(waiting.error!, /log in again/);
  // The user logs in again and the VMs page polls its uploads: the import goes on in the new session.
  const again = await logIn("root", (await import("../../toolstack/testing.ts")).ROOT_PASSWORD);
  const headers = new Headers({ cookie: `${SESSION_COOKIE}=${again.cookie}` });
  const caller = createCaller(createTRPCContext({ headers }));
  await caller.transfers.uploads({ ids: [id] });
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal(done.error, null);
  const xapi = new (await import("../../xenapi/client.ts")).XenApiClient(cu.xapi.url, again.session.session);
  // The import finished while nobody was logged in: it is not imported a second time.
  assert.equal((await xapi.call(z.array(z.string()), "VM.get_by_name_label", "outlives a logout")).length, 1);
});

test("after a console restart, an upload whose bytes all arrived is imported without the browser", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const disk = testDisk();
  const xva = await collect(testXva({ name: "all in before the restart", disks: [disk] }));
  const id = uploadId(await createUpload(cu, "complete.xva", xva.length));
  const half = Math.floor(xva.length / 2);
  assert.equal((await patch(cu, id, 0, xva.subarray(0, half))).status, 204);
  await until("the first import", async () => ((await readState(id))?.task ? true : undefined));
  // The console goes away as the last bytes land in the spool: no browser request will come again.
  dropConsoleProcess();
  const { appendFile } = await import("node:fs/promises");
  await appendFile(spoolFile(id), xva.subarray(half));
  const { resumeCompleteUploads } = await import("./tus.ts");
  await resumeCompleteUploads();
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal((await vmNamed(cu, "all in before the restart")).length, 1);
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, disk), (await import("../../toolstack/transfer/testing.ts")).diskBytes(disk));
});

// ---- Not XVAs: OVAs and disk images, read by the console itself (server/ova) as they arrive.

const { writeOvf } = await import("../../ova/descriptor-writer.ts");
const { manifestOf, qemuImage, tarOf } = await import("../../ova/testing.ts");

/** An OVA (ovf, mf, a streamOptimized VMDK of qemu-img's) of one disk; `badDigest` spoils the VMDK's line. */
async function testOva(name: string, raw: Buffer, options: { badDigest?: boolean } = {}): Promise<Buffer> {
  const vmdk = qemuImage(dataDir, raw, name, "vmdk", ["-o", "subformat=streamOptimized"]);
  const ovf = Buffer.from(writeOvf({ name, description: "", memory: 256 * MiB, vcpus: 1, firmware: "bios", secureBoot: false, os: { id: 101, type: "", description: "" }, drives: [{ kind: "disk", href: "d.vmdk", capacity: raw.length, name: "disk" }, { kind: "cd", name: "cd" }], nics: [] }));
  const listed: Array<[string, Buffer]> = [["vm.ovf", ovf], ["d.vmdk", options.badDigest === true ? Buffer.from("not these bytes") : vmdk]];
  return tarOf([["vm.ovf", ovf], ["vm.mf", manifestOf(listed)], ["d.vmdk", vmdk]]);
}

async function sendAll(cu: ConsoleUnderTest, id: string, bytes: Buffer, pieces = 3): Promise<void> {
  const piece = Math.ceil(bytes.length / pieces);
  for (let offset = 0; offset < bytes.length; offset += piece) assert.equal((await patch(cu, id, offset, bytes.subarray(offset, offset + piece))).status, 204);
}

const testRaw = () => (import("../../toolstack/transfer/testing.ts")).then(({ diskBytes }) => diskBytes(testDisk()));

test("an OVA upload becomes the VM its OVF describes while it arrives, in a task of the console's", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const raw = await testRaw();
  const ova = await testOva("ova upload", raw);
  const id = uploadId(await createUpload(cu, "appliance.ova", ova.length));
  await sendAll(cu, id, ova);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal(await cu.xapi.call(z.string(), "VM.get_name_label", done.vms[0]), "ova upload");
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, { size: raw.length } as never), raw);
  const task = await cu.xapi.call(z.looseObject({ name_label: z.string(), status: z.string() }), "task.get_record", done.task);
  assert.deepEqual([task.name_label, task.status], ["VM import: appliance.ova", "success"]);
  const listed = await cu.caller.transfers.uploads({ ids: [id] });
  assert.equal(listed.uploads[0]?.status, "done");
});

test("a qcow2 uploaded as a disk alone becomes a VDI named after it; an OVA whose manifest lies fails in words, nothing left", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const raw = await testRaw();
  const qcow2 = qemuImage(dataDir, raw, "alone", "qcow2");
  const sr = await defaultSr(cu);
  const created = await tusRequest("POST", BASE, cu.headers, { "upload-length": String(qcow2.length), "upload-metadata": `filename ${b64("data-disk.qcow2")},sr ${b64(sr)},lastModified ${b64("1")},diskOnly ${b64("true")}` });
  const id = uploadId(created);
  const vmsBefore = (await cu.xapi.call(z.array(z.string()), "VM.get_all")).length;
  await sendAll(cu, id, qcow2, 2);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.deepEqual(done.vms, []);
  assert.equal(await cu.xapi.call(z.string(), "VDI.get_name_label", done.vdis[0]), "data-disk");
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, done.vdis[0]!, { size: raw.length } as never), raw);
  assert.equal((await cu.xapi.call(z.array(z.string()), "VM.get_all")).length, vmsBefore);

  const vdisBefore = (await cu.xapi.call(z.array(z.string()), "VDI.get_all")).length;
  const bad = await testOva("lying manifest", raw, { badDigest: true });
  const badId = uploadId(await createUpload(cu, "lying.ova", bad.length));
  await sendAll(cu, badId, bad);
  const failed = await importEnded(badId);
  assert.equal(failed.status, "failed");
  assert.match(failed.error ?? "", /^the package does not match its manifest vm\.mf \(d\.vmdk: its SHA256 digest is/);
  assert.equal((await cu.xapi.call(z.array(z.string()), "VDI.get_all")).length, vdisBefore);
  assert.equal((await cu.xapi.call(z.array(z.string()), "VM.get_all")).length, vmsBefore);
});

test("an OVA upload whose import stream breaks is imported again from the spool: one VM", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const net = await relay(t, cu.toolstack.service.httpPort);
  process.env.HANGAR_TOOLSTACK_URL = net.url;
  const raw = await testRaw();
  const ova = await testOva("ova survives", raw);
  const id = uploadId(await createUpload(cu, "survives.ova", ova.length));
  const half = Math.floor(ova.length / 2);
  assert.equal((await patch(cu, id, 0, ova.subarray(0, half))).status, 204);
  const first = await until("the first import", async () => ((await readState(id))?.task ? await readState(id) : undefined));
  await new Promise((r) => setTimeout(r, 300));
  net.cut();
  // The browser goes on sending meanwhile (an import that broke while the upload waited is tried again once
  // bytes come: the pipeline's pause rule).
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await patch(cu, id, half, ova.subarray(half))).status, 204);
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.ok(done.attempts >= 2, `imported again after the break (${done.attempts} attempts)`);
  assert.equal((await vmNamed(cu, "ova survives")).length, 1, "one VM: the broken import was undone");
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, { size: raw.length } as never), raw);
  assert.notEqual(await cu.xapi.call(z.string(), "task.get_status", first.task), "pending");
});

test("after a console restart, an OVA whose bytes all arrived is imported again without the browser: the half-made VM of the first attempt goes, one VM stays", async (t) => {
  const cu = await startConsoleUnderTest(t);
  const raw = await testRaw();
  const ova = await testOva("ova after a restart", raw);
  const id = uploadId(await createUpload(cu, "restart.ova", ova.length));
  const half = Math.floor(ova.length / 2);
  assert.equal((await patch(cu, id, 0, ova.subarray(0, half))).status, 204);
  // The first attempt has made its VM and is writing its disk when the console goes away.
  await until("the first attempt's VM", async () => ((await vmNamed(cu, "ova after a restart")).length === 1 ? true : undefined));
  dropConsoleProcess();
  const { appendFile } = await import("node:fs/promises");
  await appendFile(spoolFile(id), ova.subarray(half));
  const { resumeCompleteUploads } = await import("./tus.ts");
  await resumeCompleteUploads();
  const done = await importEnded(id);
  assert.equal(done.status, "done", done.error ?? "");
  assert.equal((await vmNamed(cu, "ova after a restart")).length, 1);
  const [vdi] = await disksOf(cu, done.vms[0]!);
  assert.deepEqual(await readVdi(cu.toolstack.service.ts, vdi!, { size: raw.length } as never), raw);
});
