// Faults around /import and /export: `hangar serve` killed with SIGKILL in the middle of an import (the next
// start fails the task and removes its partial VM and volumes), and ten imports and exports at once.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { type IncomingMessage, request } from "node:http";
import { connect } from "node:net";
import { rm } from "node:fs/promises";
import { PassThrough, Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { decompressing } from "../../xva/compression.ts";
import { openXva } from "../../xva/reader.ts";
import { daemonPids, startTestToolstack, type TestToolstack, XenApiClient } from "../storage-testing.ts";
import { ROOT_PASSWORD, startServeProcess, tempDataDir } from "../testing.ts";
import { parseXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { collect, diskBytes, http, MiB, patternBlock, readVdi, type TestDisk, testXva } from "./testing.ts";

describe("hangar serve killed mid-import", () => {
  test("after the restart the task is failed and its partial VM and volumes are gone", async () => {
    const dataDir = await tempDataDir();
    let service = await startServeProcess(dataDir);
    try {
      let client = await XenApiClient.login(service.url.replace(/\/$/, ""));
      const count = async (c: XenApiClient, cls: string) => (await c.call<string[]>(`${cls}.get_all`)).length;
      const vdisBefore = await count(client, "VDI");
      const vmsBefore = await count(client, "VM");
      const blocks = new Map<number, Buffer>();
      for (let i = 0; i < 32; i++) blocks.set(i, patternBlock(100 + i));
      const archive = await collect(testXva({ name: "killed", disks: [{ size: 32 * MiB, blocks }] }));
      // Half the archive goes out, then the body stalls: the import is under way, not finished.
      const body = new PassThrough();
      const put = request(`${service.url}import?session_id=${client.session}`, { method: "PUT", headers: { "content-length": String(archive.length) } });
      put.on("error", () => undefined);
      const headers = new Promise<string>((resolve) => put.on("response", (response) => resolve(String(response.headers["task-id"]))));
      body.pipe(put);
      body.write(archive.subarray(0, archive.length / 2));
      const task = await headers;
      for (const deadline = Date.now() + 30_000; ; await sleep(100)) {
        const state = (await client.call<Record<string, string>>("task.get_other_config", task))["hangar:vm-transfer"];
        if (state !== undefined && JSON.parse(state).vms.length > 0) break;
        assert.ok(Date.now() < deadline, "the import made its VM");
      }
      assert.equal(await count(client, "VM"), vmsBefore + 1);
      process.kill(service.pid, "SIGKILL");
      await sleep(200);
      service = await startServeProcess(dataDir);
      client = await XenApiClient.login(service.url.replace(/\/$/, ""));
      const record = await client.call<Record<string, unknown>>("task.get_record", task);
      assert.equal(record.status, "failure");
      assert.equal((record.error_info as string[])[0], "TASK_INTERRUPTED");
      assert.match((record.error_info as string[])[2]!, /import/);
      assert.equal(await count(client, "VM"), vmsBefore);
      assert.equal(await count(client, "VDI"), vdisBefore);
      assert.equal(await count(client, "VBD"), 0);
    } finally {
      await service.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("a volume's datapath killed mid-transfer", () => {
  let host: TestToolstack;
  before(async () => (host = await startTestToolstack()));
  after(async () => host.stop());

  const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);
  /** The transfer state a task keeps (transfer-state.ts), once it has one. */
  const transferState = async (task: string) => {
    const state = (await call<Record<string, string>>("task.get_other_config", task))["hangar:vm-transfer"];
    return state === undefined ? undefined : (JSON.parse(state) as { volumes: Array<{ key: string }>; attachments: unknown[] });
  };
  /** Kills the volume daemon (the NBD server) of the task's plugged volume once data flows through it. */
  const killDatapath = async (task: string) => {
    for (const deadline = Date.now() + 30_000; (await call<number>("task.get_progress", task)) === 0; await sleep(50)) {
      assert.ok(Date.now() < deadline, "the transfer moves data");
    }
    const pids = daemonPids(host.dataDir);
    assert.equal(pids.length, 1, "one volume daemon: the transfer's");
    process.kill(pids[0]!, "SIGKILL");
  };
  /** The task failed with VDI_IO_ERROR, in words naming the datapath, the volume and its SR (the default one). */
  const assertDatapathFailure = async (task: string, key: string) => {
    const record = await host.client.waitTask(task);
    assert.equal(record.status, "failure");
    const [code, ...params] = record.error_info as string[];
    const words = params.join(" ");
    assert.equal(code, "VDI_IO_ERROR", words);
    const [pool] = await call<string[]>("pool.get_all");
    const sr = await call<string>("pool.get_default_SR", pool);
    for (const part of ["datapath", `volume ${key}`, await call<string>("SR.get_name_label", sr), await call<string>("SR.get_uuid", sr)]) assert.ok(words.includes(part), `"${part}" in: ${words}`);
  };
  const diskOf = async (vm: string) => {
    for (const vbd of await call<string[]>("VM.get_VBDs", vm)) if ((await call("VBD.get_type", vbd)) === "Disk") return call<string>("VBD.get_VDI", vbd);
    throw new Error("no disk");
  };
  const manyBlocks = (count: number, seed: number): TestDisk => ({ size: count * MiB, blocks: new Map(Array.from({ length: count }, (_, i) => [i, patternBlock(seed + i)])) });

  test("an import fails with VDI_IO_ERROR naming the datapath of the volume and its SR, and leaves nothing behind", async () => {
    const count = async (cls: string) => (await call<string[]>(`${cls}.get_all`)).length;
    const before = { VM: await count("VM"), VDI: await count("VDI") };
    const archive = await collect(testXva({ name: "datapath killed", disks: [manyBlocks(32, 700)] }));
    // Half the archive goes out, then the body stalls while the datapath is killed.
    const body = new PassThrough();
    const put = request(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", headers: { "content-length": String(archive.length) } });
    put.on("error", () => undefined);
    const taskId = new Promise<string>((resolve) => put.on("response", (response) => resolve(String(response.headers["task-id"]))));
    body.pipe(put);
    body.write(archive.subarray(0, archive.length / 2));
    const task = await taskId;
    await killDatapath(task);
    const { key } = (await transferState(task))!.volumes[0]!;
    body.end(archive.subarray(archive.length / 2));
    await assertDatapathFailure(task, key);
    assert.equal(await count("VM"), before.VM, "no VM left");
    assert.equal(await count("VDI"), before.VDI, "no VDI left");
  });

  test("an export fails with VDI_IO_ERROR naming the datapath of the volume and its SR; the client's archive ends short", async () => {
    const imported = await http(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", body: testXva({ disks: [manyBlocks(128, 800)] }) });
    const vm = (parseXmlRpcValue(String((await host.client.waitTask(String(imported.headers["task-id"]))).result)) as string[])[0]!;
    const task = await call<string>("task.create", "export of a killed datapath", "");
    const response = await new Promise<IncomingMessage>((resolve) => request(`${host.client.url}/export?session_id=${host.client.session}&ref=${vm}&task_id=${task}`, resolve).end());
    // A paused client holds the export back with the volume plugged, most of it unread.
    response.pause();
    await killDatapath(task);
    const key = await call<string>("VDI.get_location", await diskOf(vm));
    await assert.rejects(collect(response), "the archive is cut off, never ended as if whole");
    await assertDatapathFailure(task, key);
    assert.deepEqual(await call("VDI.get_current_operations", await diskOf(vm)), {}, "the disk is released");
  });
});

describe("hangar serve stopped with SIGTERM mid-import", () => {
  test("it exits within 15 s while an upload stalls and an event.from waits, the import undone and its task failed", async () => {
    const dataDir = await tempDataDir();
    let service = await startServeProcess(dataDir);
    try {
      let client = await XenApiClient.login(service.url.replace(/\/$/, ""));
      const vmsBefore = (await client.call<string[]>("VM.get_all")).length;
      const blocks = new Map<number, Buffer>();
      for (let i = 0; i < 32; i++) blocks.set(i, patternBlock(700 + i));
      const archive = await collect(testXva({ name: "terminated", disks: [{ size: 32 * MiB, blocks }] }));
      const put = request(`${service.url}import?session_id=${client.session}`, { method: "PUT", headers: { "content-length": String(archive.length) } });
      put.on("error", () => undefined);
      const headers = new Promise<string>((resolve) => put.on("response", (response) => resolve(String(response.headers["task-id"]))));
      put.write(archive.subarray(0, 3 * MiB));
      const task = await headers;
      for (const deadline = Date.now() + 30_000; (await client.call<string[]>("VM.get_all")).length === vmsBefore; await sleep(100)) assert.ok(Date.now() < deadline, "the import made its VM");
      const token = (await client.call<{ token: string }>("event.from", ["VM"], "", 0)).token;
      void client.call("event.from", ["VM"], token, 60).catch(() => undefined);
      await sleep(200);
      const started = Date.now();
      await service.stop();
      assert.ok(Date.now() - started < 15_000, `stopped in ${Date.now() - started} ms`);
      put.destroy();
      service = await startServeProcess(dataDir);
      client = await XenApiClient.login(service.url.replace(/\/$/, ""));
      const record = await client.call<Record<string, unknown>>("task.get_record", task);
      // Stopped, the import undid itself (before, the next start's recovery did).
      assert.equal(record.status, "failure");
      assert.deepEqual(record.error_info, ["TASK_INTERRUPTED", task, "the toolstack stopped while the task ran; what it had made was removed"]);
      assert.equal((await client.call<string[]>("VM.get_all")).length, vmsBefore);
    } finally {
      await service.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("malformed requests", () => {
  let host: TestToolstack;
  before(async () => (host = await startTestToolstack()));
  after(async () => host.stop());

  test("bad percent-encoding in a session cookie or a path segment is 400, never a 500; the service serves on", async () => {
    for (const path of ["/export?uuid=x", "/import", "/export_metadata?uuid=x", "/import_metadata"]) {
      const answer = await http(`${host.client.url}${path}`, { method: path.includes("import") ? "PUT" : "GET", headers: { cookie: "session_id=%E0%A4%A" } });
      assert.equal(answer.status, 400, `${path}: ${answer.body.toString()}`);
      assert.match(answer.body.toString(), /malformed percent-encoding/);
    }
    for (const path of ["/plugins/volume/%zz", "/metrics/%E0%A4%A"]) {
      const call = path.startsWith("/plugins") ? { method: "POST", body: Buffer.from('{"method":"Plugin.query","params":[{"dbg":"t"}],"id":1}') } : {};
      const answer = await http(`${host.client.url}${path}?session_id=${host.client.session}`, call);
      assert.equal(answer.status, 400, `${path}: ${answer.body.toString()}`);
    }
    // The service still answers.
    assert.ok(Array.isArray(await host.client.call<string[]>("VM.get_all")));
  });

  /** Raw bytes to the service; answers what came back once it closed the connection or went quiet for 2 s. */
  function rawExchange(bytes: string, endEarly = false): Promise<string> {
    return new Promise((resolve) => {
      const socket = connect(host.service.httpPort, "127.0.0.1", () => (endEarly ? socket.end(bytes) : socket.write(bytes)));
      let got = "";
      const done = () => resolve(got);
      socket.setTimeout(2000, () => socket.destroy());
      socket.on("data", (data) => (got += data.toString("latin1"))).on("close", done).on("error", () => undefined);
    });
  }

  test("a request target that is no URL, or starts with //, is 400: before, the exception ended hangar serve", async () => {
    for (const target of ["//", "//?x", "http://[::1", "http://x:99999/"]) {
      const answer = await rawExchange(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 (400|404) /, `${target}: ${answer.slice(0, 80)}`);
    }
    assert.ok(Array.isArray(await host.client.call<string[]>("VM.get_all")));
  });

  test("a client gone before its body was read is no bug report; an import it started does not stay pending", async (t) => {
    const reports = t.mock.method(console, "error", () => undefined);
    // A body shorter than its length, then the client closes.
    await rawExchange(`POST /jsonrpc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":`, true);
    // Chunk framing that fails while the route still checks the Basic credentials (a login: scrypt).
    const basic = Buffer.from(`root:${ROOT_PASSWORD}`).toString("base64");
    await rawExchange(`PUT /import HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${basic}\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\nzz\r\n`);
    for (const deadline = Date.now() + 5000; ; await sleep(100)) {
      const tasks = await host.client.call<Record<string, { status: string }>>("task.get_all_records");
      const pending = Object.values(tasks).filter((task) => task.status === "pending");
      if (pending.length === 0) break;
      // Before: pending until HANGAR_BODY_IDLE_TIMEOUT (and for ever without one).
      assert.ok(Date.now() < deadline, `${pending.length} task(s) still pending`);
    }
    assert.deepEqual(reports.mock.calls.map((call) => call.arguments.map(String).join(" ")), []);
  });

  test("a refusal before the body is read reaches clients still sending it: Python's urllib and Node's fetch get the answer, not a broken pipe", async () => {
    const urllib = `
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=b"x" * (8 << 20), method="PUT"))
    print("200")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
except Exception as e:
    print("failed:", e)
`;
    for (const [path, answer] of [
      ["/import?session_id=OpaqueRef:nobody", "401 SESSION_INVALID OpaqueRef:nobody"],
      ["/no/such/resource", "404 no such resource: PUT /no/such/resource"],
    ] as const) {
      // Not spawnSync: the toolstack answering runs in this process.
      const python = await promisify(execFile)("python3", ["-c", urllib, `${host.client.url}${path}`], { encoding: "utf8", timeout: 60_000 });
      assert.equal(python.stdout.trim(), answer, python.stderr);
      const fetched = await fetch(`${host.client.url}${path}`, { method: "PUT", body: Buffer.alloc(8 << 20, 0x78) });
      assert.equal(`${fetched.status} ${(await fetched.text()).trim()}`, answer);
    }
  });

  test("a JSON-RPC id nested 5,000 deep is an invalid request, and the call never ran", async () => {
    const label = `deep-id-${Date.now()}`;
    const body = `{"jsonrpc":"2.0","method":"task.create","params":["${host.client.session}","${label}",""],"id":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    const answer = await http(`${host.client.url}/jsonrpc`, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.from(body) });
    assert.equal(answer.status, 200);
    assert.deepEqual(JSON.parse(answer.body.toString()).error.code, -32600);
    assert.deepEqual(await host.client.call<string[]>("task.get_by_name_label", label), []);
  });
});

describe("a stalled upload", () => {
  let host: TestToolstack;
  before(async () => {
    process.env.HANGAR_BODY_IDLE_TIMEOUT = "2";
    host = await startTestToolstack();
  });
  after(async () => {
    delete process.env.HANGAR_BODY_IDLE_TIMEOUT;
    await host.stop();
  });

  /** Sends the first `sent` bytes of a 32 MiB archive, then nothing more; answers the import's task. */
  async function stalledImport(sent: number): Promise<{ task: string; put: ReturnType<typeof request> }> {
    const blocks = new Map<number, Buffer>();
    for (let i = 0; i < 32; i++) blocks.set(i, patternBlock(600 + i));
    const archive = await collect(testXva({ name: "stalled", disks: [{ size: 32 * MiB, blocks }] }));
    const put = request(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", headers: { "content-length": String(archive.length) } });
    put.on("error", () => undefined);
    const task = new Promise<string>((resolve) => put.on("response", (response) => resolve(String(response.headers["task-id"]))));
    put.write(archive.subarray(0, sent));
    return { task: await task, put };
  }

  const count = async (cls: string) => (await host.client.call<string[]>(`${cls}.get_all`)).length;

  test("task.cancel ends it at once while it waits for bytes, in ova.xml or in a disk, and undoes it", async () => {
    const [vms, vdis] = [await count("VM"), await count("VDI")];
    // Long enough that the idle timeout cannot be what ends it.
    process.env.HANGAR_BODY_IDLE_TIMEOUT = "600";
    try {
      for (const sent of [1000, 3 * MiB]) {
        const { task, put } = await stalledImport(sent);
        try {
          if (sent > 1000) for (const deadline = Date.now() + 10_000; (await count("VM")) === vms; await sleep(50)) assert.ok(Date.now() < deadline, "the import made its VM");
          // Everything sent is read by now: the import waits for bytes.
          await sleep(500);
          const started = Date.now();
          await host.client.call("task.cancel", task);
          const record = await host.client.waitTask(task, 10_000);
          // Before: the task stayed `cancelling` until the client sent more bytes or closed.
          assert.equal(record.status, "cancelled", `${sent} bytes sent`);
          assert.ok(Date.now() - started < 5000, `cancelled in ${Date.now() - started} ms`);
          assert.equal(await count("VM"), vms);
          assert.equal(await count("VDI"), vdis);
        } finally {
          put.destroy();
        }
      }
    } finally {
      process.env.HANGAR_BODY_IDLE_TIMEOUT = "2";
    }
  });

  test("a download whose client takes no byte for HANGAR_BODY_IDLE_TIMEOUT ends, and releases the VM's datapath", async () => {
    const blocks = new Map<number, Buffer>();
    for (let i = 0; i < 64; i++) blocks.set(i, patternBlock(800 + i));
    const imported = await http(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", body: testXva({ disks: [{ size: 64 * MiB, blocks }] }) });
    const vm = (parseXmlRpcValue(String((await host.client.waitTask(String(imported.headers["task-id"]))).result)) as string[])[0]!;
    const daemons = daemonPids(host.dataDir).length;
    const task = await host.client.call<string>("task.create", "held export", "");
    const response = await new Promise<IncomingMessage>((resolve) => request(`${host.client.url}/export?session_id=${host.client.session}&ref=${vm}&task_id=${task}`, resolve).end());
    response.on("error", () => undefined);
    response.pause();
    // Before: the export waited for the client for ever, its datapath plugged.
    const record = await host.client.waitTask(task, 20_000);
    assert.equal(record.status, "cancelled");
    for (const deadline = Date.now() + 10_000; daemonPids(host.dataDir).length > daemons; await sleep(100)) assert.ok(Date.now() < deadline, "the export's datapath is released");
    response.destroy();
    await host.client.call("VM.destroy", vm);
  });

  test("a body that stops arriving fails the import after HANGAR_BODY_IDLE_TIMEOUT, in words, and undoes it", async () => {
    const [vms, vdis] = [await count("VM"), await count("VDI")];
    const { task, put } = await stalledImport(3 * MiB);
    try {
      const record = await host.client.waitTask(task);
      // Before: nothing timed it out (watched for 120 s) while its VM, VDI and datapath were held.
      assert.equal(record.status, "failure");
      assert.deepEqual(record.error_info, ["IMPORT_ERROR", "the upload stalled: no byte arrived for 2 s (HANGAR_BODY_IDLE_TIMEOUT)"]);
      assert.equal(await count("VM"), vms);
      assert.equal(await count("VDI"), vdis);
    } finally {
      put.destroy();
    }
  });
});

describe("concurrency", () => {
  let host: TestToolstack;
  before(async () => (host = await startTestToolstack()));
  after(async () => host.stop());

  test("a client that stops reading holds the export: it does not run ahead into memory", async () => {
    const blocks = new Map<number, Buffer>();
    for (let i = 0; i < 128; i++) blocks.set(i, patternBlock(500 + i));
    const disk: TestDisk = { size: 128 * MiB, blocks };
    const imported = await http(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", body: testXva({ disks: [disk] }) });
    const vm = (parseXmlRpcValue(String((await host.client.waitTask(String(imported.headers["task-id"]))).result)) as string[])[0]!;
    const task = await host.client.call<string>("task.create", "held export", "");
    const response = await new Promise<IncomingMessage>((resolve) => request(`${host.client.url}/export?session_id=${host.client.session}&ref=${vm}&task_id=${task}`, resolve).end());
    response.pause();
    await sleep(2000);
    const held = await host.client.call<number>("task.get_progress", task);
    assert.ok(held < 0.5, `a paused client holds the export back (progress ${held})`);
    const body = await collect(response);
    assert.equal((await host.client.waitTask(task)).status, "success");
    assert.ok(body.length > disk.size);
  });

  test("ten imports and exports at once complete with correct bytes", async () => {
    const base = host.client.url;
    const session = host.client.session;
    const disks: TestDisk[] = Array.from({ length: 5 }, (_, n) => ({ size: 12 * MiB, blocks: new Map([[0, patternBlock(200 + n)], [6, patternBlock(300 + n)], [11, patternBlock(400 + n)]]) }));
    const waitVm = async (task: string) => {
      const record = await host.client.waitTask(task);
      assert.equal(record.status, "success", JSON.stringify(record.error_info));
      return (parseXmlRpcValue(String(record.result)) as string[])[0]!;
    };
    const importOne = async (disk: TestDisk, n: number) => {
      const answer = await http(`${base}/import?session_id=${session}`, { method: "PUT", body: testXva({ name: `parallel ${n}`, disks: [disk] }) });
      return waitVm(String(answer.headers["task-id"]));
    };
    // Five VMs to export, imported first; then five more imports run beside their five exports.
    const sources = await Promise.all(disks.map(importOne));
    const [exports, imports] = await Promise.all([
      Promise.all(sources.map((vm) => http(`${base}/export?session_id=${session}&ref=${vm}&use_compression=${["false", "gzip", "zstd"][sources.indexOf(vm) % 3]}`))),
      Promise.all(disks.map((disk, n) => importOne(disk, n + 5))),
    ]);
    const diskOf = async (vm: string) => {
      for (const vbd of await host.client.call<string[]>("VM.get_VBDs", vm)) if ((await host.client.call("VBD.get_type", vbd)) === "Disk") return host.client.call<string>("VBD.get_VDI", vbd);
      throw new Error("no disk");
    };
    for (const [n, vm] of imports.entries()) assert.ok((await readVdi(host.service.ts, await diskOf(vm), disks[n]!)).equals(diskBytes(disks[n]!)), `import ${n}`);
    for (const [n, answer] of exports.entries()) {
      assert.equal(answer.status, 200);
      assert.equal((await host.client.waitTask(String(answer.headers["task-id"]))).status, "success");
      const archive = await openXva((await decompressing(Readable.from([answer.body]))).stream);
      const vdi = archive.metadata.objects.find((o) => o.class === "VDI")!;
      const bytes = Buffer.alloc(disks[n]!.size);
      for await (const d of archive.disks(new Map([[vdi.id, Number(vdi.snapshot.virtual_size)]]))) for await (const block of d.blocks) block.data.copy(bytes, block.offset);
      assert.ok(bytes.equals(diskBytes(disks[n]!)), `export ${n}`);
    }
  });
});
