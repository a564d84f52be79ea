// The console's transfers in a pool of two hosts (server/api/pool-testing.ts): an archive uploaded to the
// console for an SR of the member is sent where the master's redirect says (probed with an empty PUT, as Xen
// Orchestra does) and imported there; the export of that VM follows the master's redirect to the member; an
// SR of an offline host is refused before any byte.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { z } from "zod";
import { probePut, type ResourceRefused } from "../xenapi/resource.ts";

const spoolDir = mkdtempSync(join(tmpdir(), "hangar-pool-upload-test-"));
process.env.HANGAR_DATA_DIR = spoolDir;
process.on("exit", () => rmSync(spoolDir, { recursive: true, force: true }));

const { MEMBER_ADDRESS, startTestPool } = await import("../api/pool-testing.ts");
const { collect, diskBytes, http, MiB, patternBlock, readVdi, testXva } = await import("../toolstack/transfer/testing.ts");
const { serveUploads } = await import("./upload/testing.ts");
const { readState } = await import("./upload/state.ts");
const { cancelPipeline } = await import("./upload/pipeline.ts");
const { serveDownloads } = await import("./download/testing.ts");
// The spools stay in this test's dir (the pool's master points HANGAR_DATA_DIR at its own).
(await import("./upload/state.ts")).uploadSpoolDir();

const { url: BASE } = await serveUploads();
const b64 = (s: string) => Buffer.from(s).toString("base64");

function tusRequest(method: string, url: string, headers: Headers, extra: Record<string, string>, body?: Buffer): Promise<Response> {
  const h = new Headers(headers);
  h.set("tus-resumable", "1.0.0");
  for (const [k, v] of Object.entries(extra)) h.set(k, v);
  return fetch(url, { method, headers: h, body: body === undefined ? undefined : new Uint8Array(body) });
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  for (const deadline = Date.now() + ms; ; await new Promise((r) => setTimeout(r, 100))) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
  }
}

/** The probe's answer: the URL that takes the upload, or the refusal's status and reason. */
const findImportHost = (start: URL) => probePut(start).catch((error: ResourceRefused) => ({ status: error.status, text: error.reason }));

test("transfers for the member's SR follow the master's redirects", async (t) => {
  const pool = await startTestPool(t);
  const { caller, headers, xapi, session } = pool.console;
  const memberSr = await pool.localSr(pool.member);

  await t.test("the probe: an empty PUT to the master is sent on to the member", async () => {
    const start = new URL(`${pool.masterUrl}/import`);
    start.searchParams.set("session_id", session.session);
    start.searchParams.set("sr_id", memberSr);
    const target = await findImportHost(start);
    assert.ok(target instanceof URL, JSON.stringify(target));
    assert.equal(target.origin, pool.memberUrl);
    assert.equal(target.searchParams.get("sr_id"), memberSr);
    // The master's own SR stays on the master.
    start.searchParams.set("sr_id", await pool.localSr(pool.master));
    assert.equal(String(await findImportHost(start)), String(start));
  });

  let imported = "";
  await t.test("the upload: imported into the member's SR, the disk's bytes intact", async () => {
    const disk = { size: 16 * MiB, blocks: new Map([0, 5, 15].map((i) => [i, patternBlock(i + 7)])) };
    const xva = await collect(testXva({ name: "imported on the member", disks: [disk] }));
    const created = await tusRequest("POST", BASE, headers, { "upload-length": String(xva.length), "upload-metadata": `filename ${b64("member.xva")},sr ${b64(memberSr)},lastModified ${b64(String(Date.now()))}` });
    assert.equal(created.status, 201, await created.clone().text());
    const id = created.headers.get("location")!.split("/").pop()!;
    t.after(() => cancelPipeline(id));
    assert.equal((await tusRequest("PATCH", `${BASE}/${id}`, headers, { "upload-offset": "0", "content-type": "application/offset+octet-stream" }, xva)).status, 204);
    const done = await until("the import to end", async () => {
      const state = await readState(id);
      return state?.status === "done" || state?.status === "failed" ? state : undefined;
    });
    assert.equal(done.status, "done", done.error ?? "");
    assert.equal(done.attempts, 1);
    const [vm] = done.vms;
    assert.equal(await xapi.call(z.string(), "VM.get_name_label", vm), "imported on the member");
    const vbds = await xapi.call(z.array(z.string()), "VM.get_VBDs", vm);
    const vdis = await Promise.all(vbds.map((vbd) => xapi.call(z.string(), "VBD.get_VDI", vbd)));
    const disks = vdis.filter((vdi) => vdi !== "OpaqueRef:NULL");
    assert.equal(disks.length, 1);
    assert.equal(await xapi.call(z.string(), "VDI.get_SR", disks[0]), memberSr);
    assert.deepEqual(await readVdi(pool.member.ts, disks[0]!, disk), diskBytes(disk));
    imported = vm!;
  });

  await t.test("the export of that VM: the master's redirect followed to the member, the task succeeds", async () => {
    const server = await serveDownloads();
    t.after(() => server.close());
    const started = await caller.downloads.startExport({ vmRef: imported, compression: "none" });
    const answer = await http(`${server.url}/${started.url.slice("/api/download/vm/".length)}`, { headers: { cookie: headers.get("cookie")! } });
    assert.equal(answer.status, 200, answer.body.toString().slice(0, 300));
    assert.ok(answer.body.length > MiB, `${answer.body.length} bytes`);
    assert.match(answer.body.subarray(0, 512).toString("latin1"), /ova\.xml/);
    await until("the export task", async () => ((await caller.downloads.exportProgress({ task: started.task })).state === "succeeded" ? true : undefined));
  });

  await t.test("the member offline: an upload for its SR is refused before any byte, the probe answers why", async () => {
    await pool.stopMember();
    const refused = await tusRequest("POST", BASE, headers, { "upload-length": "1024", "upload-metadata": `filename ${b64("late.xva")},sr ${b64(memberSr)},lastModified ${b64(String(Date.now()))}` });
    assert.equal(refused.status, 409);
    assert.match(await refused.text(), new RegExp(`on the host .*${MEMBER_ADDRESS.replaceAll(".", "\\.")}.*, which is offline`));
    const start = new URL(`${pool.masterUrl}/import`);
    start.searchParams.set("session_id", session.session);
    start.searchParams.set("sr_id", memberSr);
    const answer = await findImportHost(start);
    assert.ok(!(answer instanceof URL));
    assert.equal(answer.status, 503);
    assert.match(answer.text, /HOST_OFFLINE/);
  });
});
