// /import and /export over real HTTP against a toolstack with a file SR: round trips in every compression,
// what the records and volumes look like afterwards, the HTTP contract (statuses, headers, probes), and bad
// archives failing with a reason and leaving nothing behind.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { get as httpGet } from "node:http";
import { readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createGzip, createZstdCompress, gzipSync } from "node:zlib";
import { pack as tarPack } from "tar-stream";
import { packLegacyDirectory } from "../../xva/legacy.ts";
import { formatOvaXml, type OvaObject } from "../../xva/ova-xml.ts";
import { writeXva } from "../../xva/writer.ts";
import { exportVersion } from "./ova-records.ts";
import { Readable } from "node:stream";
import { openXva } from "../../xva/reader.ts";
import { XVA_BLOCK_SIZE } from "../../xva/format.ts";
import { decompressing } from "../../xva/compression.ts";
import { setTimeout as delay } from "node:timers/promises";
import { holdsFileOf, PiB, startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { locateVdi } from "../vdi-records.ts";
import { openVolume } from "./volume-io.ts";
import { ROOT_PASSWORD } from "../testing.ts";
import { longestStep } from "../../event-loop-testing.ts";
import { parseXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { collect, diskBytes, http, MiB, patternBlock, readVdi, type TestDisk, testXva, vmObjects } from "./testing.ts";

let host: TestToolstack;
let base: string;

before(async () => {
  host = await startTestToolstack();
  base = host.client.url;
});
after(async () => host.stop());

const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);

/** Names of what exists now: VMs, VBDs, VIFs, VDIs (to check that a failure left nothing). */
async function inventory(): Promise<{ VM: number; VBD: number; VIF: number; VDI: number }> {
  const count = async (cls: string) => (await call<string[]>(`${cls}.get_all`)).length;
  return { VM: await count("VM"), VBD: await count("VBD"), VIF: await count("VIF"), VDI: await count("VDI") };
}

/** A tar of exactly these members, in this order. */
function crafted(members: Array<[string, Buffer]>): Promise<Buffer> {
  const pack = tarPack();
  for (const [name, data] of members) pack.entry({ name, mode: 0o644, mtime: new Date(0) }, data);
  pack.finalize();
  return collect(pack as AsyncIterable<Uint8Array>);
}

const sparseDisk = (): TestDisk => ({ size: 64 * MiB, blocks: new Map([[0, patternBlock(1)], [5, patternBlock(2)], [63, patternBlock(3)]]) });

/** PUT /import of an archive; answers the HTTP answer and the task's record. */
async function importArchive(body: Buffer | Readable, query = "", headers: Record<string, string> = {}) {
  const answer = await http(`${base}/import?session_id=${host.client.session}${query}`, { method: "PUT", body, headers });
  const task = answer.headers["task-id"] as string | undefined;
  return { answer, task: task === undefined ? undefined : await host.client.waitTask(task) };
}

function createdVms(task: Record<string, unknown>): string[] {
  return parseXmlRpcValue(String(task.result)) as string[];
}

async function diskOf(vm: string): Promise<string> {
  const vbds = await call<string[]>("VM.get_VBDs", vm);
  for (const vbd of vbds) if ((await call("VBD.get_type", vbd)) === "Disk") return call<string>("VBD.get_VDI", vbd);
  throw new Error("no disk");
}

describe("PUT /import", () => {
  test("an XVA becomes a VM with its disk, CD and VIF; the disk's bytes are the archive's, holes stay holes", async () => {
    const disk = sparseDisk();
    const archive = await collect(testXva({ name: "web-01", disks: [disk] }));
    const { answer, task } = await importArchive(archive, "", { "content-length": String(archive.length) });
    assert.equal(answer.status, 200);
    assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
    const [vm] = createdVms(task!);
    const record = await call<Record<string, unknown>>("VM.get_record", vm);
    assert.equal(record.name_label, "web-01");
    assert.equal(record.memory_static_max, 2 * 1024 * MiB);
    assert.equal(record.VCPUs_at_startup, 2);
    assert.deepEqual(record.HVM_boot_params, { order: "cdn", firmware: "uefi" });
    assert.deepEqual(record.current_operations, {});
    const vbds = await Promise.all((record.VBDs as string[]).map((vbd) => call<Record<string, unknown>>("VBD.get_record", vbd)));
    assert.deepEqual(vbds.map((vbd) => [vbd.type, vbd.empty, vbd.userdevice]).sort(), [["CD", true, "3"], ["Disk", false, "0"]]);
    const [vif] = record.VIFs as string[];
    const mac = await call<string>("VIF.get_MAC", vif);
    assert.notEqual(mac, "aa:bb:cc:00:11:22", "a plain import gets new MACs");
    const vdi = await diskOf(vm!);
    const vdiRecord = await call<Record<string, unknown>>("VDI.get_record", vdi);
    assert.equal(vdiRecord.virtual_size, 64 * MiB);
    assert.equal(vdiRecord.name_label, "disk 0");
    assert.deepEqual(vdiRecord.other_config, { purpose: "test" });
    assert.ok(Number(vdiRecord.physical_utilisation) < 16 * MiB, `thin: ${String(vdiRecord.physical_utilisation)} bytes used`);
    assert.ok((await readVdi(host.service.ts, vdi, disk)).equals(diskBytes(disk)));
  });

  test("gzip and zstd archives are detected from their first bytes, and chunked bodies are taken", async () => {
    const disk = sparseDisk();
    for (const [compressor, name] of [[() => createGzip(), "gzip"], [() => createZstdCompress(), "zstd"]] as const) {
      const body = testXva({ name, disks: [disk] }).pipe(compressor());
      const { task } = await importArchive(body); // no length: chunked
      assert.equal(task!.status, "success", `${name}: ${JSON.stringify(task!.error_info)}`);
      const [vm] = createdVms(task!);
      assert.ok((await readVdi(host.service.ts, await diskOf(vm!), disk)).equals(diskBytes(disk)), name);
    }
  });

  test("a disk plugged by one user while another unplugs it: the second keeps it open and reads it whole", async (t) => {
    const disk = sparseDisk();
    const { task } = await importArchive(testXva({ name: "shared reads", disks: [disk] }));
    const { ts } = host.service;
    const vdi = await locateVdi(ts, await diskOf(createdVms(task!)[0]!));
    const first = await openVolume(ts, vdi.sr, vdi.key, "ro");
    // The second user's attach is slow: the first one's unplug (its close) comes between its open and attach.
    const datapathFor = ts.storage.datapathFor;
    ts.storage.datapathFor = async function (this: typeof ts.storage, uris) {
      const found = await datapathFor.call(this, uris);
      const call = found.plugin.client.call.bind(found.plugin.client);
      const slowAttach = ((method: string, args: unknown) => (method === "Datapath.attach" ? delay(800).then(() => call(method as "Datapath.attach", args as never)) : call(method as "Datapath.attach", args as never))) as typeof call;
      return { ...found, plugin: { ...found.plugin, client: { ...found.plugin.client, call: slowAttach } } };
    };
    t.after(() => void (ts.storage.datapathFor = datapathFor));
    const second = openVolume(ts, vdi.sr, vdi.key, "ro");
    await delay(200);
    await first.close();
    const opened = await second;
    try {
      assert.ok((await opened.client.read(0, disk.size)).equals(diskBytes(disk)));
    } finally {
      await opened.close();
    }
  });

  test("an empty-body probe without a task answers 200 and makes nothing", async () => {
    const before = await inventory();
    const answer = await http(`${base}/import/?session_id=${host.client.session}`, { method: "PUT", body: Buffer.alloc(0), headers: { "content-length": "0" } });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers["task-id"], undefined);
    assert.deepEqual(await inventory(), before);
  });

  test("a corrupt block fails the task with IMPORT_ERROR and removes everything made; force=true imports it", async () => {
    const disk = sparseDisk();
    const archive = await collect(testXva({ disks: [disk] }));
    // Flip a byte inside block 5's data (the member after ova.xml's and block 0's).
    const at = archive.indexOf(patternBlock(2).subarray(0, 64)) + 1000;
    archive[at] = archive[at]! ^ 0xff;
    const before = await inventory();
    const { task } = await importArchive(archive);
    assert.equal(task!.status, "failure");
    assert.equal((task!.error_info as string[])[0], "IMPORT_ERROR");
    assert.match((task!.error_info as string[])[1]!, /checksum/);
    assert.deepEqual(await inventory(), before, "nothing left behind");
    const forced = await importArchive(archive, "&force=true");
    assert.equal(forced.task!.status, "success");
    const bytes = await readVdi(host.service.ts, await diskOf(createdVms(forced.task!)[0]!));
    assert.equal(bytes[at - archive.indexOf(patternBlock(2).subarray(0, 64)) + 5 * XVA_BLOCK_SIZE], patternBlock(2)[1000]! ^ 0xff);
  });

  test("bad archives fail with a clear reason and leave nothing behind", async () => {
    const disk: TestDisk = { size: 8 * MiB, blocks: new Map([[0, patternBlock(4)], [3, patternBlock(5)]]) };
    const whole = await collect(testXva({ disks: [disk] }));
    const { objects, version } = vmObjects({ disks: [disk] });
    const ova = formatOvaXml({ version, objects });
    const vdi = objects.find((o) => o.class === "VDI" && o.snapshot.name_label === "disk 0")!.id;
    const block = (n: number) => patternBlock(70 + n);
    const cases: Array<[string, Buffer, RegExp]> = [
      ["a member named with ..", await crafted([["ova.xml", Buffer.from(ova)], [`../${vdi}/00000000`, block(0)]]), /\.\./],
      ["an absolute member", await crafted([["ova.xml", Buffer.from(ova)], [`/${vdi}/00000000`, block(0)]]), /absolute/],
      ["blocks out of order", await crafted([["ova.xml", Buffer.from(ova)], [`${vdi}/00000003`, block(3)], [`${vdi}/00000001`, block(1)], [`${vdi}/00000007`, block(7)]]), /order/],
      ["a duplicate block", await crafted([["ova.xml", Buffer.from(ova)], [`${vdi}/00000000`, block(0)], [`${vdi}/00000000`, block(0)], [`${vdi}/00000007`, block(7)]]), /duplicate/],
      ["a disk larger than declared", await crafted([["ova.xml", Buffer.from(ova)], [`${vdi}/00000000`, block(0)], [`${vdi}/00000009`, block(9)]]), /past the disk/],
      ["an ova.xml over 16 MiB", await crafted([["ova.xml", Buffer.alloc(17 * MiB, 0x20)]]), /ova\.xml is \d+ bytes/],
      ["XML that is not XML-RPC", await crafted([["ova.xml", Buffer.from("<html><body>hello</body></html>")]]), /ova\.xml/],
      ["not an archive", Buffer.from("hello, this is not an XVA\n".repeat(100)), /tar|ova\.xml/],
      ["truncated mid-block", whole.subarray(0, whole.length - 3 * XVA_BLOCK_SIZE / 2), /truncat|end/i],
      ["newer export version", await collect(testXva({ disks: [disk], version: { xapi_major: 99 } })), /xapi 99/],
      ["gzip that is not", Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.alloc(4096, 7)]), /gzip|header/i],
    ];
    for (const [name, body, reason] of cases) {
      const before = await inventory();
      const { answer, task } = await importArchive(body);
      assert.equal(answer.status, 200, name);
      assert.equal(task!.status, "failure", name);
      assert.match((task!.error_info as string[]).join(" "), reason, name);
      assert.deepEqual(await inventory(), before, `${name}: nothing left behind`);
    }
  });

  test("ova.xml with thousands of VBDs is refused in words, a VM of 255 imports, and the service keeps answering throughout", async () => {
    // Empty CD drives: the VBDs are the whole cost; no disk data follows.
    const archive = (count: number) => {
      const vbds = Array.from({ length: count }, (_, n) => `Ref:${n + 1}`);
      const objects: OvaObject[] = vbds.map((id, n) => ({ class: "VBD", id, snapshot: { VM: "Ref:0", VDI: "OpaqueRef:NULL", type: "CD", empty: true, userdevice: String(n), mode: "RO" } }));
      objects.push({ class: "VM", id: "Ref:0", snapshot: { name_label: `${count} drives`, VBDs: vbds, VIFs: [] } });
      return collect(writeXva({ ovaXml: formatOvaXml({ version: exportVersion(), objects }), disks: [], checksum: "xxhash" }));
    };
    // Made before the measure: only the service's steps count.
    const [tooMany, most] = [await archive(4000), await archive(255)];
    const { longestMs } = await longestStep(async () => {
      const before = await inventory();
      const refused = await importArchive(tooMany);
      assert.equal(refused.task!.status, "failure");
      assert.match((refused.task!.error_info as string[]).join(" "), /VM Ref:0 has 4000 VBDs; an import takes at most 255/);
      assert.deepEqual(await inventory(), before);
      const { task } = await importArchive(most);
      assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
      const [vm] = createdVms(task!);
      assert.equal((await call<string[]>("VM.get_VBDs", vm)).length, 255);
      await call("VM.destroy", vm);
    });
    // Before: 4,000 VBDs held the event loop for 90 s, 1,000 for 4.9 s (one synchronous run of SQLite calls).
    assert.ok(longestMs < 100, `the event loop worked ${longestMs.toFixed(0)} ms without a break`);
  });

  test("a disk of 1 PiB the SR's filesystem refuses: SR_BACKEND_FAILURE saying the size in words, and nothing left behind", async (t) => {
    const [pool] = await call<string[]>("pool.get_all");
    const [pbd] = await call<string[]>("SR.get_PBDs", await call<string>("pool.get_default_SR", pool));
    const srPath = (await call<Record<string, string>>("PBD.get_device_config", pbd)).path!;
    if (holdsFileOf(dirname(srPath), PiB)) return t.skip("this filesystem holds a file of 1 PiB: nothing to refuse");
    const { objects, version } = vmObjects({ disks: [{ size: PiB, blocks: new Map() }] });
    const layers = () => readdirSync(join(srPath, "layers")).sort();
    const before = { inventory: await inventory(), layers: layers() };
    const { task } = await importArchive(await crafted([["ova.xml", Buffer.from(formatOvaXml({ version, objects }))]]));
    assert.equal(task!.status, "failure");
    const [code, ...params] = task!.error_info as string[];
    assert.equal(code, "SR_BACKEND_FAILURE", params.join(" "));
    assert.match(params.join(" "), /1 PiB/);
    assert.deepEqual(await inventory(), before.inventory, "no VDI or VM left");
    assert.deepEqual(layers(), before.layers, "no layer file left");
  });

  test("a legacy package (appliance 0.1, gzipped chunks) imports from a tar stream", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-legacy-"));
    try {
      const size = 5 * MiB;
      const disk: TestDisk = { size, blocks: new Map([[0, patternBlock(61)], [3, patternBlock(62)]]) };
      await writeFile(
        join(dir, "ova.xml"),
        `<?xml version="1.0" ?>
<appliance version="0.1">
  <vm name="vm">
    <label> legacy web </label>
    <shortdesc>from a legacy package</shortdesc>
    <config mem_set="536870912" vcpus="2"/>
    <hacks is_hvm="false" kernel_boot_cmdline="root=/dev/xvda1"/>
    <vbd device="xvda" function="root" mode="w" vdi="vdi_xvda"/>
  </vm>
  <vdi name="vdi_xvda" size="${size}" source="file://xvda" type="dir-gzipped-chunks" variety="system"/>
</appliance>
`,
      );
      await mkdir(join(dir, "xvda"));
      await writeFile(join(dir, "xvda", "chunk-000000000.gz"), gzipSync(diskBytes(disk)));
      const { task } = await importArchive(packLegacyDirectory(dir));
      assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
      const [vm] = createdVms(task!);
      const record = await call<Record<string, unknown>>("VM.get_record", vm);
      assert.equal(record.name_label, "legacy web");
      assert.equal(record.memory_static_max, 512 * MiB);
      assert.equal(record.VCPUs_max, 2);
      assert.equal(record.PV_args, "root=/dev/xvda1");
      assert.ok((await readVdi(host.service.ts, await diskOf(vm!), disk)).equals(diskBytes(disk)));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("an SR that fills up mid-import fails the task with SR_BACKEND_FAILURE saying so in words, and leaves nothing behind", async (t) => {
    // A file SR on a 24 MiB tmpfs: mounting needs root (npm test runs as root in CI).
    const dir = await mkdtemp(join(tmpdir(), "hangar-full-sr-"));
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", dir], { stdio: "ignore" });
    } catch {
      await rm(dir, { recursive: true, force: true });
      t.skip("mounting a small tmpfs needs root");
      return;
    }
    try {
      const [hostRef] = await call<string[]>("host.get_all");
      const sr = await call<string>("SR.create", hostRef, { path: join(dir, "sr") }, 0, "small", "", "file", "user", false, {});
      const blocks = new Map<number, Buffer>();
      for (let i = 0; i < 48; i++) blocks.set(i, patternBlock(80 + i));
      const before = await inventory();
      const { answer, task } = await importArchive(testXva({ disks: [{ size: 48 * MiB, blocks }] }), `&sr_id=${sr}`);
      assert.equal(answer.status, 200);
      assert.equal(task!.status, "failure");
      const [code, ...params] = task!.error_info as string[];
      assert.equal(code, "SR_BACKEND_FAILURE", params.join(" "));
      assert.match(params.join(" "), /^SR "small" \(.+\) is full: no space left for the data of volume /, "the SR and its trouble in words");
      assert.deepEqual(await inventory(), before, "nothing left behind");
      assert.deepEqual(await call("SR.get_VDIs", sr), []);
      await call("SR.destroy", sr);
    } finally {
      execFileSync("umount", ["-l", dir]);
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("refusals: 401 with a realm, 404 for an unknown SR, 405 for GET; the caller's task fails with the reason", async () => {
    const noSession = await http(`${base}/import?session_id=OpaqueRef:nope`, { method: "PUT", body: Buffer.from("x") });
    assert.equal(noSession.status, 401);
    assert.match(String(noSession.headers["www-authenticate"]), /^Basic realm="/);
    const task = await call<string>("task.create", "import", "");
    const noSr = await http(`${base}/import?session_id=${host.client.session}&task_id=${task}&sr_id=OpaqueRef:00000000-0000-4000-8000-000000000000`, { method: "PUT", body: Buffer.from("x") });
    assert.equal(noSr.status, 404);
    const failed = await host.client.waitTask(task);
    assert.equal(failed.status, "failure");
    assert.deepEqual((failed.error_info as string[])[0], "HANDLE_INVALID");
    assert.equal((await http(`${base}/import?session_id=${host.client.session}`)).status, 405);
    // curl -T waits for 100 Continue: a refused upload is refused before its body is sent.
    const dir = await mkdtemp(join(tmpdir(), "hangar-continue-"));
    try {
      await writeFile(join(dir, "big.xva"), Buffer.alloc(8 * MiB));
      // Not execFileSync: the service answering is this very process.
      const { stdout: headers } = await promisify(execFile)("curl", ["-sS", "-D", "-", "-o", "/dev/null", "-T", join(dir, "big.xva"), `${base}/import?session_id=OpaqueRef:nope`]);
      assert.doesNotMatch(headers, /100 Continue/);
      assert.match(headers, /^HTTP\/1\.1 401/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("HTTP Basic credentials work in place of a session", async () => {
    const archive = await collect(testXva({ disks: [{ size: 2 * MiB, blocks: new Map([[1, patternBlock(9)]]) }] }));
    const auth = `Basic ${Buffer.from(`root:${ROOT_PASSWORD}`).toString("base64")}`;
    const answer = await http(`${base}/import`, { method: "PUT", body: archive, headers: { authorization: auth } });
    assert.equal(answer.status, 200);
    assert.equal((await host.client.waitTask(String(answer.headers["task-id"]))).status, "success");
    const wrong = await http(`${base}/import`, { method: "PUT", body: archive, headers: { authorization: `Basic ${Buffer.from("root:wrong").toString("base64")}` } });
    assert.equal(wrong.status, 401);
  });

  test("DEFAULT_SR_NOT_FOUND without sr_id when the pool has no default SR", async () => {
    const [pool] = await call<string[]>("pool.get_all");
    const sr = await call<string>("pool.get_default_SR", pool);
    await call("pool.set_default_SR", pool, "OpaqueRef:NULL");
    try {
      const answer = await http(`${base}/import?session_id=${host.client.session}`, { method: "PUT", body: Buffer.from("x") });
      assert.equal(answer.status, 400);
      assert.match(answer.body.toString(), /DEFAULT_SR_NOT_FOUND/);
    } finally {
      await call("pool.set_default_SR", pool, sr);
    }
  });

  test("restore=true keeps the VM's uuid and MACs and replaces the halted original", async () => {
    const uuid = crypto.randomUUID();
    const archive = await collect(testXva({ uuid, mac: "aa:bb:cc:dd:ee:01", disks: [{ size: 2 * MiB, blocks: new Map([[0, patternBlock(7)]]) }] }));
    const first = createdVms((await importArchive(archive, "&restore=true")).task!)[0]!;
    assert.equal(await call("VM.get_uuid", first), uuid);
    const second = createdVms((await importArchive(archive, "&restore=true")).task!)[0]!;
    assert.notEqual(second, first);
    assert.equal(await call("VM.get_uuid", second), uuid);
    assert.equal(await call("VM.get_by_uuid", uuid), second);
    assert.equal(await call("VIF.get_MAC", (await call<string[]>("VM.get_VIFs", second))[0]), "aa:bb:cc:dd:ee:01");
    await assert.rejects(call("VM.get_record", first), /HANDLE_INVALID/);
  });
});

describe("GET /export", () => {
  let vm: string;
  let disk: TestDisk;
  before(async () => {
    disk = { size: 40 * MiB + 512, blocks: new Map([[0, patternBlock(11)], [17, patternBlock(12)], [40, patternBlock(13, 512)]]) };
    const { task } = await importArchive(await collect(testXva({ name: "db/01 \"prod\"", disks: [disk] })));
    vm = createdVms(task!)[0]!;
  });

  test("streams ova.xml and the disk's blocks with xxhash checksums; headers come first; zero blocks are skipped", async () => {
    const answer = await http(`${base}/export/?session_id=${host.client.session}&ref=${vm}`);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers["content-type"], "application/octet-stream");
    assert.match(String(answer.headers["content-disposition"]), /^attachment; filename="db_01 _prod_\.xva"/);
    const task = await host.client.waitTask(String(answer.headers["task-id"]));
    assert.equal(task.status, "success");
    const archive = await openXva(Readable.from([answer.body]));
    const classes = archive.metadata.objects.map((o) => o.class).sort();
    assert.deepEqual(classes, ["SR", "VBD", "VBD", "VDI", "VIF", "VM", "network"]);
    const vdi = archive.metadata.objects.find((o) => o.class === "VDI")!;
    const sizes = new Map([[vdi.id, Number(vdi.snapshot.virtual_size)]]);
    const seen: number[] = [];
    const bytes = Buffer.alloc(disk.size);
    for await (const d of archive.disks(sizes)) {
      for await (const block of d.blocks) {
        assert.equal(block.checksum, "xxhash");
        seen.push(block.index);
        block.data.copy(bytes, block.offset);
      }
    }
    assert.deepEqual(seen, [0, 17, 40]);
    assert.ok(bytes.equals(diskBytes(disk)));
  });

  test("use_compression=gzip|zstd streams one valid compressed archive that imports to the same bytes", async () => {
    for (const compression of ["true", "zstd"]) {
      const answer = await http(`${base}/export?session_id=${host.client.session}&uuid=${await call("VM.get_uuid", vm)}&use_compression=${compression}`);
      assert.equal(answer.status, 200);
      const { compression: found } = await decompressing(Readable.from([answer.body]));
      assert.equal(found, compression === "true" ? "gzip" : "zstd");
      const { task } = await importArchive(answer.body);
      assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
      assert.ok((await readVdi(host.service.ts, await diskOf(createdVms(task!)[0]!), disk)).equals(diskBytes(disk)), compression);
    }
  });

  test("checksum=sha1 writes .checksum members for old importers", async () => {
    const answer = await http(`${base}/export?session_id=${host.client.session}&ref=${vm}&checksum=sha1`);
    assert.ok(answer.body.includes(Buffer.from("/00000017.checksum")));
    assert.ok(!answer.body.includes(Buffer.from(".xxhash")));
  });

  test("/export_metadata is ova.xml alone; /import_metadata links the VM to the existing disk (dry_run makes nothing)", async () => {
    const answer = await http(`${base}/export_metadata?session_id=${host.client.session}&ref=${vm}`);
    assert.equal(answer.status, 200);
    assert.ok(answer.body.length < 64 * 1024);
    const put = (query: string) => http(`${base}/import_metadata?session_id=${host.client.session}${query}`, { method: "PUT", body: answer.body });
    const before = await inventory();
    const dryRun = await host.client.waitTask(String((await put("&dry_run=true")).headers["task-id"]));
    assert.equal(dryRun.status, "success");
    assert.deepEqual(await inventory(), before);
    const imported = await host.client.waitTask(String((await put("")).headers["task-id"]));
    assert.equal(imported.status, "success", JSON.stringify(imported.error_info));
    const copy = createdVms(imported)[0]!;
    assert.equal(await diskOf(copy), await diskOf(vm), "the metadata import links the same VDI");
  });

  test("unknown VM → 404; the client going away cancels the export and releases the datapath", async () => {
    assert.equal((await http(`${base}/export?session_id=${host.client.session}&ref=OpaqueRef:00000000-0000-4000-8000-000000000000`)).status, 404);
    // gzip too: a hang-up mid-member once surfaced as an unhandled error of the tar entry's stream.
    const blocks = new Map<number, Buffer>();
    for (let i = 0; i < 48; i++) blocks.set(i, patternBlock(900 + i));
    const big = createdVms((await importArchive(testXva({ disks: [{ size: 48 * MiB, blocks }] }))).task!)[0]!;
    for (const compression of ["false", "gzip", "zstd"]) {
      const task = await call<string>("task.create", "export", "");
      await new Promise<void>((resolve, reject) => {
        const request = httpGet(`${base}/export?session_id=${host.client.session}&ref=${big}&task_id=${task}&use_compression=${compression}`, (response) => {
          response.once("data", () => {
            response.destroy();
            resolve();
          });
        });
        request.on("error", () => undefined);
        request.setTimeout(10_000, () => reject(new Error("no data")));
      });
      const record = await host.client.waitTask(task);
      assert.equal(record.status, "cancelled", compression);
    }
    // The disk is free again: a VDI operation that needs it idle works.
    assert.deepEqual(await call("VDI.get_current_operations", await diskOf(big)), {});
  });
});
