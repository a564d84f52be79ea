// A disk that fills up under a transfer, for real (issue 22): small tmpfs mounts (mounting needs root: npm test runs
// as root in CI; elsewhere each test is skipped saying so) as the SR's directory during an import, as the console's
// upload spool during two uploads, and as the console's export spool during a download. Each time: a clear error in
// words, and nothing half-made left — no VM, no VDI, no volume or layer file, no spool file — and the room given
// back (the same disk takes a smaller transfer afterwards). The toolstack is `hangar serve`, a process of its own;
// the console's upload and download routes run in this process, as the console's API routes run them.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { checkConsistency } from "../plugins/filesr/test-support.ts";
import { isPidRunning } from "../plugins/filesr/liveness.ts";
import { processesWithEnv } from "../stray-processes.ts";
import { XenApiClient } from "../toolstack/storage-testing.ts";
import { type ServeProcess, startServeProcess, tempDataDir } from "../toolstack/testing.ts";
import { collect, http, MiB, patternBlock, type TestDisk, testXva } from "../toolstack/transfer/testing.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

// The console's data dir (its spools), apart from the toolstack's; set before the console's modules first use it.
const consoleDir = mkdtempSync(join(tmpdir(), "hangar-disk-full-console-"));
process.env.HANGAR_DATA_DIR = consoleDir;
// The spools' own floor (1 GiB by default) would refuse these transfers before their first byte: the tmpfs is the limit here.
process.env.HANGAR_TRANSFER_MIN_FREE_MB = "1";

const { consoleOn } = await import("../api/testing.ts");
const { serveUploads } = await import("./upload/testing.ts");
const { readState, spoolFile, uploadSpoolDir } = await import("./upload/state.ts");
const { cancelPipeline } = await import("./upload/pipeline.ts");
const { serveDownloads } = await import("./download/testing.ts");
const { exportsDir, listSpools } = await import("./download/spool.ts");

const SPOOL_MIB = 48;
const BOUND_MS = 30_000;

let toolstackDir: string;
let service: ServeProcess;
let client: XenApiClient;
let cookieHeaders: Headers;
const mounts: string[] = [];

/** A tmpfs of `mib` MiB at `dir`; false when this user cannot mount one. */
function mountTmpfs(dir: string, mib: number): boolean {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${mib}m`, "tmpfs", dir], { stdio: "ignore" });
  } catch {
    return false;
  }
  mounts.push(dir);
  return true;
}

const usedBytes = (dir: string) => {
  const fs = statfsSync(dir);
  return (fs.blocks - fs.bfree) * fs.bsize;
};

const denseDisk = (mib: number, seed: number): TestDisk => ({ size: mib * MiB, blocks: new Map(Array.from({ length: mib }, (_, i) => [i, patternBlock(seed + i)])) });
const call = <T = unknown>(method: string, ...params: unknown[]) => client.call<T>(method, ...params);

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  for (const deadline = Date.now() + BOUND_MS; ; await sleep(100)) {
    const value = await probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, what);
  }
}

/** Imports an archive through the toolstack's /import (into `sr` when given); answers the task's record. */
async function importXva(archive: Buffer, sr?: string): Promise<Record<string, unknown>> {
  const answer = await http(`${service.url}import?session_id=${client.session}${sr === undefined ? "" : `&sr_id=${sr}`}`, {
    method: "PUT",
    body: archive,
    headers: { "content-length": String(archive.length) },
  });
  assert.equal(answer.status, 200, answer.body.toString());
  return client.waitTask(String(answer.headers["task-id"]));
}

/** Volume daemons, GC runs and plugin calls of the toolstack's host still running (the datasource daemons are the SRs'). */
function leftProcesses(): string[] {
  return processesWithEnv(`HANGAR_DATA_DIR=${toolstackDir}`)
    .filter((pid) => pid !== service.pid && isPidRunning(pid))
    .flatMap((pid) => {
      try {
        return [readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ")];
      } catch {
        return [];
      }
    })
    .filter((line) => !line.includes("datasource-daemon-main.ts"));
}

async function assertNothingLeft(): Promise<void> {
  await until(`no volume daemon, GC or plugin call left: ${JSON.stringify(leftProcesses())}`, () => (leftProcesses().length === 0 ? true : undefined));
  const tasks = Object.values(await call<Record<string, Record<string, unknown>>>("task.get_all_records"));
  assert.deepEqual(tasks.filter((t) => t.status === "pending" || t.status === "cancelling").map((t) => t.name_label), [], "every task has ended");
}

function skipUnlessMounted(t: TestContext, mounted: boolean): boolean {
  if (!mounted) t.skip("mounting a small tmpfs needs root");
  return mounted;
}

describe("a disk that fills up", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    toolstackDir = await tempDataDir();
    service = await startServeProcess(toolstackDir);
    client = await XenApiClient.login(service.url.replace(/\/$/, ""));
    cookieHeaders = (await consoleOn(service.url.replace(/\/$/, ""))).headers;
  });

  after(async () => {
    await service.stop();
    for (const dir of mounts.reverse()) execFileSync("umount", ["-l", dir]);
    rmSync(toolstackDir, { recursive: true, force: true });
    rmSync(consoleDir, { recursive: true, force: true });
  });

  test("the SR's disk, mid-import: SR_BACKEND_FAILURE saying the SR is full; no VM, VDI or layer file left; the room given back", async (t) => {
    const mount = mkdtempSync(join(tmpdir(), "hangar-full-sr-"));
    if (!skipUnlessMounted(t, mountTmpfs(mount, SPOOL_MIB))) return;
    const [host] = await call<string[]>("host.get_all");
    const srPath = join(mount, "sr");
    const sr = await call<string>("SR.create", host, { path: srPath }, 0, "small", "", "file", "user", false, {});
    const vms = (await call<string[]>("VM.get_all")).length;
    const used = usedBytes(mount);

    const task = await importXva(await collect(testXva({ name: "too big", disks: [denseDisk(64, 10)] })), sr);
    assert.equal(task.status, "failure");
    const [code, ...params] = task.error_info as string[];
    assert.equal(code, "SR_BACKEND_FAILURE", params.join(" "));
    assert.match(params.join(" "), /^SR "small" \(.+\) is full: no space left for the data of volume /);

    assert.equal((await call<string[]>("VM.get_all")).length, vms, "no VM left");
    await call("SR.scan", sr);
    assert.deepEqual(await call("SR.get_VDIs", sr), [], "no VDI left");
    await assertNothingLeft();
    assert.deepEqual(readdirSync(join(srPath, "layers")), [], "no layer file left");
    assert.deepEqual(checkConsistency(srPath, { exactFiles: true }), []);
    await until(`the room given back (${usedBytes(mount)} bytes used, ${used} before)`, () => (usedBytes(mount) <= used + MiB ? true : undefined));

    // The SR takes what fits.
    const small = await importXva(await collect(testXva({ name: "fits", disks: [denseDisk(8, 20)] })), sr);
    assert.equal(small.status, "success", JSON.stringify(small.error_info));
    const [vm] = parseXmlRpcValue(String(small.result)) as string[];
    await call("VM.destroy", vm);
    for (const vdi of await call<string[]>("SR.get_VDIs", sr)) await call("VDI.destroy", vdi);
    await assertNothingLeft();
  });

  test("the console's upload spool, mid-upload: the upload fails saying the console's disk is full; nothing of it left", async (t) => {
    if (!skipUnlessMounted(t, mountTmpfs(join(consoleDir, "transfers", "uploads"), SPOOL_MIB))) return;
    assert.equal(uploadSpoolDir(), join(consoleDir, "transfers", "uploads"));
    const { url } = await serveUploads();
    const [pool] = await call<string[]>("pool.get_all");
    const sr = await call<string>("pool.get_default_SR", pool);
    const tus = (method: string, at: string, extra: Record<string, string>, body?: Buffer) => {
      const headers = new Headers(cookieHeaders);
      headers.set("tus-resumable", "1.0.0");
      for (const [k, v] of Object.entries(extra)) headers.set(k, v);
      return fetch(at, { method, headers, body: body === undefined ? undefined : new Uint8Array(body) });
    };
    const b64 = (text: string) => Buffer.from(text).toString("base64");
    // Two uploads of 30 MiB: each fits the spool's 48 MiB when it starts, not both.
    const uploads = await Promise.all(
      [0, 1].map(async (n) => {
        const name = `spool full ${n}`;
        const xva = await collect(testXva({ name, disks: [denseDisk(30, 40 + 100 * n)] }));
        const created = await tus("POST", url, { "upload-length": String(xva.length), "upload-metadata": `filename ${b64(`full-${n}.xva`)},sr ${b64(sr)},lastModified ${b64(String(n))}` });
        assert.equal(created.status, 201, await created.text());
        return { name, xva, id: created.headers.get("location")!.split("/").pop()! };
      }),
    );
    try {
      const answers = await Promise.all(uploads.map(({ xva, id }) => tus("PATCH", `${url}/${id}`, { "upload-offset": "0", "content-type": "application/offset+octet-stream" }, xva).then(async (r) => `${r.status} ${(await r.text()).trim()}`)));
      t.diagnostic(`the PATCHes answered: ${JSON.stringify(answers)}`);
      const ended = await Promise.all(uploads.map(({ id }) => until("the upload's import ended", async () => {
        const state = await readState(id);
        return state?.status === "done" || state?.status === "failed" ? state : undefined;
      })));
      const failed = uploads.filter((_, n) => ended[n]!.status === "failed");
      assert.ok(failed.length > 0, "the disk filled under one of them at least");
      for (const [n, { name, id }] of uploads.entries()) {
        const state = ended[n]!;
        const vms = await call<string[]>("VM.get_by_name_label", name);
        if (state.status === "done") {
          assert.equal(vms.length, 1);
          continue;
        }
        assert.match(state.error ?? "", /^The console could not keep the upload on its disk \(its disk is full\); upload the file again\.$/);
        // What the browser's tus client hears when it comes back for it.
        const head = await tus("HEAD", `${url}/${id}`, {});
        assert.equal(head.status, 422);
        assert.deepEqual(vms, [], "no VM of a failed upload");
        if (state.task !== null) assert.notEqual((await client.waitTask(state.task)).status, "success", "its import ended, not as a success");
        await until(`its spool removed: ${JSON.stringify(readdirSync(uploadSpoolDir()))}`, () => (!existsSync(spoolFile(id)) && !existsSync(`${spoolFile(id)}.json`) ? true : undefined));
      }
      await assertNothingLeft();
      // The disks of the failed ones are gone with them: no VDI of theirs on the SR.
      const names = await Promise.all((await call<string[]>("SR.get_VDIs", sr)).map((vdi) => call<string>("VDI.get_name_label", vdi)));
      assert.equal(names.filter((name) => name === "disk 0").length, uploads.length - failed.length);
    } finally {
      for (const { id } of uploads) await cancelPipeline(id);
    }
  });

  test("the console's export spool, mid-download: 507 in words (or, once answering, a cut download); no spool left; the export released", async (t) => {
    if (!skipUnlessMounted(t, mountTmpfs(join(consoleDir, "transfers", "exports"), SPOOL_MIB))) return;
    assert.equal(exportsDir(), join(consoleDir, "transfers", "exports"));
    const downloads = await serveDownloads();
    t.after(() => downloads.close());
    const cookie = cookieHeaders.get("cookie")!;
    const imported = async (name: string, mib: number) => {
      const record = await importXva(await collect(testXva({ name, disks: [denseDisk(mib, 60)] })));
      assert.equal(record.status, "success", JSON.stringify(record.error_info));
      const [vm] = parseXmlRpcValue(String(record.result)) as string[];
      return { vm: vm!, uuid: await call<string>("VM.get_uuid", vm) };
    };
    const big = await imported("export too big", 64);
    const task = await call<string>("task.create", "Export onto a full disk", "");
    const answer = await http(`${downloads.url}/${big.uuid}.xva?compression=none&task=${encodeURIComponent(task)}`, { headers: { cookie } }).catch((error: Error) => error);
    t.diagnostic(answer instanceof Error ? `the download broke off: ${answer.message}` : `the download answered ${answer.status} with ${answer.body.length} bytes`);
    if (answer instanceof Error) {
      // Cut after its headers: the browser sees a failed download, never a whole one.
    } else if (answer.status === 200) {
      assert.ok(answer.body.length < 64 * MiB, `cut short (${answer.body.length} bytes)`);
    } else {
      assert.equal(answer.status, 507);
      assert.match(answer.body.toString(), /^The console's disk is full: the export was stopped\.$/m);
    }
    // The toolstack's export ended with the console's reading of it, releasing the disk.
    const record = await client.waitTask(task, BOUND_MS);
    assert.notEqual(record.status, "success");
    // What the Export dialog shows (the task's end): the console hung up, which the toolstack takes as a cancel.
    t.diagnostic(`the export's task: ${String(record.status)} ${JSON.stringify(record.error_info)}`);
    for (const vbd of await call<string[]>("VM.get_VBDs", big.vm)) {
      if ((await call("VBD.get_type", vbd)) === "Disk") assert.deepEqual(await call("VDI.get_current_operations", await call<string>("VBD.get_VDI", vbd)), {});
    }
    await assertNothingLeft();
    // No half export stays on the full disk (before: its 48 MiB stayed until the next download swept it).
    await until(`no spool left: ${JSON.stringify(readdirSync(exportsDir()))}`, async () => ((await listSpools()).length === 0 && readdirSync(exportsDir()).length === 0 ? true : undefined));
    // The room given back: a smaller export goes through the same disk whole.
    const small = await imported("export that fits", 8);
    const whole = await http(`${downloads.url}/${small.uuid}.xva?compression=none`, { headers: { cookie } });
    assert.equal(whole.status, 200, whole.body.toString());
    const direct = await http(`${service.url}export?session_id=${client.session}&uuid=${small.uuid}&use_compression=false&offset=0&etag=${encodeURIComponent(String(whole.headers.etag))}`);
    assert.ok(whole.body.equals(direct.body), "the same bytes as the toolstack's export");
  });
});
