// A pool of three `hangar serve` processes on 127.0.0.2 (master), 127.0.0.3 and 127.0.0.4, one port, one
// PostgreSQL database: hosts and PBDs as clients read them, one master at a time, imports and exports sent
// to the master and redirected to the host with the data (curl -L, Xen Orchestra's xen-api), tasks watched and
// cancelled from a third host, a host killed mid-export, and the master restarted under its clients.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createClient, type Xapi } from "xen-api";
import { z } from "zod";
import { freePort } from "../free-port.ts";
import { openXva } from "../xva/reader.ts";
import { startTestPostgres, type TestPostgres } from "./db/testing.ts";
import { ROOT_PASSWORD, type ServeProcess, startServeProcess } from "./testing.ts";
import { collect, diskBytes, MiB, patternBlock, type TestDisk, testXva } from "./transfer/testing.ts";
import { XenApiClient, zTaskRecord } from "../xenapi/client.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

const run = promisify(execFile);
const HANGAR = fileURLToPath(new URL("../../bin/hangar", import.meta.url));
/** Heartbeats 4× a second: a killed host is taken for dead after 1.25 s (a loaded CI machine stalls less). */
const HEARTBEAT_MS = 250;
/** No test here may hang the run: each ends in words within this. */
const LIMIT = { timeout: 180_000 };

let cluster: TestPostgres;
let databaseUrl: string;
let port: number;
let work: string;
const hosts = new Map<string, ServeProcess>();

async function startHost(address: string, role: "master" | "member"): Promise<ServeProcess> {
  const dataDir = hosts.get(address)?.dataDir ?? (await mkdtemp(join(tmpdir(), `hangar-pool-${address}-`)));
  const env = { HANGAR_DATABASE_URL: databaseUrl, HANGAR_HOST_ADDRESS: address, HANGAR_POOL_ROLE: role, HANGAR_HEARTBEAT_MS: String(HEARTBEAT_MS) };
  const host = await startServeProcess(dataDir, env, { address, port });
  hosts.set(address, host);
  return host;
}

const A = "127.0.0.2";
const B = "127.0.0.3";
const C = "127.0.0.4";
let master: XenApiClient;

before(async () => {
  cluster = await startTestPostgres();
  databaseUrl = await cluster.createDatabase();
  port = await freePort();
  work = await mkdtemp(join(tmpdir(), "hangar-pool-work-"));
  await startHost(A, "master");
  // Members may start together.
  await Promise.all([startHost(B, "member"), startHost(C, "member")]);
  master = await XenApiClient.login(hosts.get(A)!.url, "root", ROOT_PASSWORD, "pool test");
});
after(async () => {
  await Promise.all([...hosts.values()].map((host) => host.stop()));
  await cluster.stop();
  await Promise.all([...hosts.values()].map((host) => rm(host.dataDir, { recursive: true, force: true })));
  await rm(work, { recursive: true, force: true });
});

const zHost = z.looseObject({ address: z.string(), live: z.boolean(), enabled: z.boolean(), name_label: z.string(), PBDs: z.array(z.string()) });
const zPbd = z.looseObject({ host: z.string(), SR: z.string(), device_config: z.record(z.string(), z.string()), currently_attached: z.boolean() });

async function hostRef(address: string, client = master): Promise<string> {
  const records = await client.call(z.record(z.string(), zHost), "host.get_all_records");
  const found = Object.entries(records).find(([, record]) => record.address === address);
  assert.ok(found !== undefined, `a host at ${address}`);
  return found[0];
}

/** The local SR a host made on its first start (its only PBD's SR). */
async function localSr(address: string): Promise<string> {
  const [pbd] = await master.call(z.array(z.string()), "host.get_PBDs", await hostRef(address));
  return master.call(z.string(), "PBD.get_SR", pbd);
}

const base = (address: string) => `http://${address}:${port}`;

/** One HTTP exchange without following anything. */
function exchange(url: string, method: string, body?: Buffer): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method, agent: false, headers: body === undefined ? {} : { "content-length": body.length } }, resolve);
    request.on("error", reject);
    request.end(body);
  });
}

/** The first disk of an XVA, its blocks laid out in a buffer of the disk's size. */
async function firstDisk(archive: Buffer): Promise<Buffer> {
  const xva = await openXva(Readable.from([archive]));
  const vdi = xva.metadata.objects.find((o) => o.class === "VDI")!;
  const size = Number(vdi.snapshot.virtual_size);
  const out = Buffer.alloc(size);
  for await (const disk of xva.disks(new Map([[vdi.id, size]]))) {
    for await (const block of disk.blocks) block.data.copy(out, block.offset);
    break;
  }
  xva.close();
  return out;
}

/** An empty 8 MiB VDI made through the master. */
function createVdi(sr: string, name: string): Promise<string> {
  const record = { SR: sr, name_label: name, name_description: "", type: "user", virtual_size: 8 * MiB, sharable: false, read_only: false, other_config: {}, xenstore_data: {}, sm_config: {}, tags: [] };
  return master.call(z.string(), "VDI.create", record);
}

const smallDisk = (seed: number): TestDisk => ({ size: 16 * MiB, blocks: new Map([[0, patternBlock(seed)], [7, patternBlock(seed + 1)], [15, patternBlock(seed + 2)]]) });

test("hosts and PBDs: every host registered with its address, live, with its own attached local SR; the first is the master", LIMIT, async () => {
  const records = await master.call(z.record(z.string(), zHost), "host.get_all_records");
  assert.deepEqual(Object.values(records).map((r) => r.address).sort(), [A, B, C]);
  for (const record of Object.values(records)) {
    assert.equal(record.live, true);
    assert.equal(record.enabled, true);
    assert.equal(record.PBDs.length, 1);
  }
  const [pool] = await master.call(z.array(z.string()), "pool.get_all");
  assert.equal(await master.call(z.string(), "pool.get_master", pool), await hostRef(A));
  // Each host's SR is attached through its own PBD, made by that host's plugin.
  const pbds = await master.call(z.record(z.string(), zPbd), "PBD.get_all_records");
  assert.equal(Object.keys(pbds).length, 3);
  for (const [ref, pbd] of Object.entries(pbds)) {
    assert.equal(pbd.currently_attached, true);
    const address = records[pbd.host]!.address;
    assert.deepEqual(records[pbd.host]!.PBDs, [ref]);
    assert.match(pbd.device_config.path ?? "", new RegExp(`hangar-pool-${address.replaceAll(".", "\\.")}-`));
  }
  // Any host answers for the whole pool.
  const c = new XenApiClient(hosts.get(C)!.url, master.session);
  assert.deepEqual(Object.keys(await c.call(z.record(z.string(), zHost), "host.get_all_records")).sort(), Object.keys(records).sort());
});

test("a second master refuses to start while the master lives", LIMIT, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "hangar-pool-second-"));
  try {
    const env = { HANGAR_DATABASE_URL: databaseUrl, HANGAR_HOST_ADDRESS: "127.0.0.5", HANGAR_POOL_ROLE: "master", HANGAR_HEARTBEAT_MS: String(HEARTBEAT_MS) };
    await assert.rejects(startServeProcess(dataDir, env, { address: "127.0.0.5", port }), /the pool's master .* \(127\.0\.0\.2\) is alive: start this host as a member/);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test("SR calls on the master reach the plugins of the host that attaches the SR", LIMIT, async () => {
  const sr = await localSr(B);
  const vdi = await createVdi(sr, "made on B through A");
  assert.equal(await master.call(z.string(), "VDI.get_name_label", vdi), "made on B through A");
  assert.ok((await master.call(z.array(z.string()), "SR.get_VDIs", sr)).includes(vdi));
  const health = await master.call(z.array(z.string()), "SR.get_health", sr);
  assert.equal(health[0], "Healthy");
  await master.call(z.unknown(), "VDI.destroy", vdi);
  // The plugins and datasource files of a host are not open to anyone.
  for (const path of ["/plugins", "/metrics/sr-datasources"]) {
    const refused = await exchange(`${base(B)}${path}`, "GET");
    refused.resume();
    assert.equal(refused.statusCode, 401, path);
  }
});

test("VDI.copy through the master runs on the host of the VDI's SR (forwarded); a copy to another host's SR says where to send it", LIMIT, async () => {
  const srA = await localSr(A);
  const srB = await localSr(B);
  const vdi = await createVdi(srB, "copied on B");
  const copy = await master.call(z.string(), "VDI.copy", vdi, srB);
  assert.equal(await master.call(z.string(), "VDI.get_SR", copy), srB);
  assert.equal(await master.call(z.string(), "VDI.get_name_label", copy), "copied on B");
  const task = await master.call(z.string(), "Async.VDI.copy", vdi, srB);
  const record = await master.waitTask(task);
  assert.equal(record.status, "success", JSON.stringify(record.error_info));
  assert.equal(record.resident_on, await hostRef(B));
  const second = String(parseXmlRpcValue(record.result));
  await assert.rejects(master.call(z.string(), "VDI.copy", vdi, srA), (error: Error) => /OPERATION_NOT_ALLOWED/.test(error.message) && /127\.0\.0\.2/.test(error.message));
  for (const made of [copy, second, vdi]) await master.call(z.unknown(), "VDI.destroy", made);
});

test("import into host B's SR and export of its VM through the master: 302 to B, followed by curl -L and xen-api", LIMIT, async () => {
  const srB = await localSr(B);
  const disk = smallDisk(40);
  const archive = join(work, "b.xva");
  await writeFile(archive, await collect(testXva({ name: "lives on B", disks: [disk] })));

  // The master sends the import to B, same path and query.
  const probe = await exchange(`${base(A)}/import?session_id=${master.session}&sr_id=${srB}`, "PUT", Buffer.alloc(0));
  probe.resume();
  assert.equal(probe.statusCode, 302);
  assert.equal(probe.headers.location, `${base(B)}/import?session_id=${master.session}&sr_id=${srB}`);

  // curl -L follows it with the archive.
  const { stdout: headers } = await run("curl", ["-sS", "-L", "-D", "-", "-o", "/dev/null", "-T", archive, `${base(A)}/import?session_id=${master.session}&sr_id=${srB}`]);
  const task = /^task-id: (\S+)/im.exec(headers)?.[1];
  assert.ok(task !== undefined, headers);
  const record = await master.waitTask(task);
  assert.equal(record.status, "success", JSON.stringify(record.error_info));
  assert.equal(record.resident_on, await hostRef(B), "B ran the import");
  const vm = (parseXmlRpcValue(record.result) as string[])[0]!;

  // The export of that VM through the master comes from B, with the bytes imported.
  const redirected = await exchange(`${base(A)}/export?session_id=${master.session}&ref=${vm}`, "GET");
  redirected.resume();
  assert.equal(redirected.statusCode, 302);
  assert.equal(redirected.headers.location, `${base(B)}/export?session_id=${master.session}&ref=${vm}`);
  const { stdout: exported } = await run("curl", ["-sSfL", `${base(A)}/export?session_id=${master.session}&ref=${vm}`], { encoding: "buffer", maxBuffer: 64 * MiB });
  assert.ok((await firstDisk(exported)).equals(diskBytes(disk)));

  // Xen Orchestra's client: its probe finds B, the archive goes there; getResource follows the export's redirect.
  const xapi: Xapi = createClient({ url: hosts.get(A)!.url, auth: { user: "root", password: ROOT_PASSWORD }, transport: "json-rpc" });
  await xapi.connect();
  try {
    const second = smallDisk(50);
    const result = await xapi.putResource(testXva({ name: "via xen-api on B", disks: [second] }), "/import/", { query: { sr_id: srB } });
    const xoVm = /OpaqueRef:[0-9a-f-]+/.exec(String(result))?.[0];
    assert.ok(xoVm !== undefined, String(result));
    const response = await xapi.getResource("/export/", { query: { ref: xoVm } });
    assert.ok((await firstDisk(await collect(response.body))).equals(diskBytes(second)));
  } finally {
    await xapi.disconnect();
  }
});

test("Hangar's CLI through the master: vm-import into B's SR and vm-export of that VM follow the redirects", LIMIT, async () => {
  const srB = await master.call(z.string(), "SR.get_uuid", await localSr(B));
  const disk = smallDisk(70);
  const archive = join(work, "cli.xva");
  await writeFile(archive, await collect(testXva({ name: "via the CLI", disks: [disk] })));
  const env = { ...process.env, HANGAR_URL: hosts.get(A)!.url, HANGAR_PASSWORD: ROOT_PASSWORD };
  const imported = await run(HANGAR, ["vm-import", archive, "--sr", srB], { env });
  const uuid = /^([0-9a-f-]{36}) {2}via the CLI$/m.exec(imported.stdout)?.[1];
  assert.ok(uuid !== undefined, imported.stdout + imported.stderr);
  const vm = await master.call(z.string(), "VM.get_by_uuid", uuid);
  const [vbd] = await master.call(z.array(z.string()), "VM.get_VBDs", vm);
  const vdi = await master.call(z.string(), "VBD.get_VDI", vbd);
  assert.equal(await master.call(z.string(), "VDI.get_SR", vdi), await localSr(B));
  const exported = join(work, "cli-export.xva");
  await run(HANGAR, ["vm-export", uuid, exported], { env });
  assert.ok((await firstDisk(await readFile(exported))).equals(diskBytes(disk)));
});

/** An export through the master of a VM on B, its body left unread (the export stalls on B, mid-disk). */
async function stalledExport(vm: string): Promise<{ task: string; response: IncomingMessage }> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const follow = (url: string) => {
      const request = httpRequest(url, { agent: false }, (answer) => {
        if (answer.statusCode === 302) {
          answer.resume();
          return follow(answer.headers.location!);
        }
        resolve(answer);
      });
      request.on("error", reject);
      request.end();
    };
    follow(`${base(A)}/export?session_id=${master.session}&ref=${vm}`);
  });
  assert.equal(response.statusCode, 200);
  response.pause();
  return { task: String(response.headers["task-id"]), response };
}

/** A VM on B with a disk large enough that its export outlasts a socket's buffers. */
async function bigVmOnB(name: string): Promise<string> {
  const blocks = new Map<number, Buffer>();
  for (let i = 0; i < 96; i++) blocks.set(i, patternBlock(100 + i));
  const answer = await collectImport(testXva({ name, disks: [{ size: 96 * MiB, blocks }] }), await localSr(B));
  return answer;
}

async function collectImport(archive: AsyncIterable<Uint8Array>, sr: string): Promise<string> {
  const path = join(work, `${crypto.randomUUID()}.xva`);
  await writeFile(path, await collect(archive));
  const { stdout } = await run("curl", ["-sS", "-L", "-D", "-", "-o", "/dev/null", "-T", path, `${base(A)}/import?session_id=${master.session}&sr_id=${sr}`]);
  const record = await master.waitTask(/^task-id: (\S+)/im.exec(stdout)![1]!);
  assert.equal(record.status, "success", JSON.stringify(record.error_info));
  return (parseXmlRpcValue(record.result) as string[])[0]!;
}

test("a task running on B is watched from C and cancelled from C", LIMIT, async () => {
  const vm = await bigVmOnB("watched from C");
  const c = new XenApiClient(hosts.get(C)!.url, master.session);
  const { task, response } = await stalledExport(vm);
  const seen = await c.call(zTaskRecord, "task.get_record", task);
  assert.equal(seen.status, "pending");
  assert.equal(seen.resident_on, await hostRef(B));
  // Events on C tell of it.
  const { token } = await c.call(z.looseObject({ token: z.string() }), "event.from", ["task"], "", 0);
  await c.call(z.unknown(), "task.cancel", task);
  const batch = await c.call(z.looseObject({ events: z.array(z.looseObject({ ref: z.string() })) }), "event.from", ["task"], token, 10);
  assert.ok(batch.events.some((event) => event.ref === task));
  const ended = await c.waitTask(task);
  assert.equal(ended.status, "cancelled");
  response.destroy();
});

test("host B killed mid-export: the task fails with the reason; the other hosts lose nothing; B's SR says it is offline", LIMIT, async () => {
  const vm = await bigVmOnB("B dies");
  const srA = await localSr(A);
  const srB = await localSr(B);
  const vmsBefore = (await master.call(z.array(z.string()), "VM.get_all")).length;
  const { task, response } = await stalledExport(vm);
  await hosts.get(B)!.kill();
  response.destroy();
  const failed = await master.waitTask(task);
  assert.equal(failed.status, "failure");
  assert.equal(failed.error_info[0], "HOST_OFFLINE");
  assert.match(failed.error_info.join(" "), /127\.0\.0\.3.*offline/);
  assert.equal((await master.call(zHost, "host.get_record", await hostRef(B))).live, false);

  // A VDI operation on B's SR fails in words; its record says Unreachable; a redirect to B is refused.
  await assert.rejects(master.call(z.unknown(), "SR.scan", srB), (error: Error) => /HOST_OFFLINE/.test(error.message) && /127\.0\.0\.3/.test(error.message));
  assert.equal((await master.call(z.array(z.string()), "SR.get_health", srB))[0], "Unreachable");
  const refused = await exchange(`${base(A)}/export?session_id=${master.session}&ref=${vm}`, "GET");
  refused.resume();
  assert.equal(refused.statusCode, 503);

  // Nothing lost elsewhere: every VM still listed, an import into A's SR works, C still answers.
  assert.equal((await master.call(z.array(z.string()), "VM.get_all")).length, vmsBefore);
  const disk = smallDisk(60);
  await collectImport(testXva({ name: "on A after B died", disks: [disk] }), srA);
  const c = new XenApiClient(hosts.get(C)!.url, master.session);
  assert.equal((await c.call(z.array(z.string()), "SR.get_health", srA))[0], "Healthy");

  // B back: live again, its SR with it; the failed task keeps its reason.
  await startHost(B, "member");
  assert.equal((await master.call(zHost, "host.get_record", await hostRef(B))).live, true);
  assert.equal((await master.call(z.array(z.string()), "SR.get_health", srB))[0], "Healthy");
  const after = await master.call(zTaskRecord, "task.get_record", task);
  assert.equal(after.status, "failure");
  assert.equal(after.error_info[0], "HOST_OFFLINE");
});

test("the master restarted: clients carry on with their sessions; a member promoted when asked, or when the master is dead", LIMIT, async () => {
  const xapi: Xapi = createClient({ url: hosts.get(A)!.url, auth: { user: "root", password: ROOT_PASSWORD }, transport: "json-rpc" });
  await xapi.connect();
  try {
    await hosts.get(A)!.stop();
    await startHost(A, "master");
    assert.equal((await master.call(z.array(z.string()), "host.get_all")).length, 3);
    assert.ok(Array.isArray(await xapi.call("VM.get_all")));
    const [pool] = await master.call(z.array(z.string()), "pool.get_all");
    assert.equal(await master.call(z.string(), "pool.get_master", pool), await hostRef(A));

    // pool.designate_new_master hands the role to C, and back.
    await master.call(z.unknown(), "pool.designate_new_master", await hostRef(C));
    assert.equal(await master.call(z.string(), "pool.get_master", pool), await hostRef(C));
    await master.call(z.unknown(), "pool.designate_new_master", await hostRef(A));
    assert.equal(await master.call(z.string(), "pool.get_master", pool), await hostRef(A));

    // The master dies: a member takes over when told to (not while the master lives), and the old master
    // comes back as a member (as master it would be refused).
    const c = new XenApiClient(hosts.get(C)!.url, master.session);
    await assert.rejects(c.call(z.unknown(), "pool.emergency_transition_to_master"), /the pool's master is alive/);
    const a = await hostRef(A);
    await hosts.get(A)!.kill();
    while ((await c.call(zHost, "host.get_record", a)).live) await new Promise((resolve) => setTimeout(resolve, 100));
    await c.call(z.unknown(), "pool.emergency_transition_to_master");
    assert.equal(await c.call(z.string(), "pool.get_master", pool), await hostRef(C, c));
    await assert.rejects(startHost(A, "master"), /the pool's master .* \(127\.0\.0\.4\) is alive/);
    await startHost(A, "member");
    assert.equal((await c.call(zHost, "host.get_record", a)).live, true);
  } finally {
    await xapi.disconnect();
  }
});
