// Real peers of /import and /export in their ordinary use: Xen Orchestra's `xen-api` client (putResource with
// its empty-body probe and 1 PiB Content-Length, getResource), Xen Orchestra's XVA writer, Debian's xva-img
// (V7 tar headers, SHA-1 checksums) both ways, GNU tar, xxhsum and curl.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { importVm as xoImportVm } from "@xen-orchestra/xva/importVm.mjs";
import { createClient, type Xapi } from "xen-api";
import { formatOvaXml } from "../../xva/ova-xml.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { ROOT_PASSWORD } from "../testing.ts";
import { parseXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { collect, diskBytes, http, MiB, patternBlock, readVdi, type TestDisk, testXva, vmObjects } from "./testing.ts";

const run = promisify(execFile);

let host: TestToolstack;
let xapi: Xapi;
let work: string;

before(async () => {
  host = await startTestToolstack();
  xapi = createClient({ url: host.client.url, auth: { user: "root", password: ROOT_PASSWORD }, transport: "json-rpc" });
  await xapi.connect();
  await xapi.objectsFetched;
  work = await mkdtemp(join(tmpdir(), "hangar-xva-peers-"));
});
after(async () => {
  await xapi.disconnect();
  await host.stop();
  await rm(work, { recursive: true, force: true });
});

const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);

async function diskOf(vm: string): Promise<string> {
  for (const vbd of await call<string[]>("VM.get_VBDs", vm)) if ((await call("VBD.get_type", vbd)) === "Disk") return call<string>("VBD.get_VDI", vbd);
  throw new Error("no disk");
}

const disk = (): TestDisk => ({ size: 24 * MiB, blocks: new Map([[0, patternBlock(21)], [9, patternBlock(22)], [23, patternBlock(23)]]) });

/** A VM imported through plain HTTP (PUT /import of the archive). */
async function importedVmFrom(archive: Buffer): Promise<string> {
  const answer = await http(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", body: archive });
  const task = await host.client.waitTask(String(answer.headers["task-id"]));
  assert.equal(task.status, "success", JSON.stringify(task.error_info));
  return (parseXmlRpcValue(String(task.result)) as string[])[0]!;
}

describe("Xen Orchestra", () => {
  test("xen-api putResource imports a stream (probe + 1 PiB length) and getResource exports it back", async () => {
    const d = disk();
    const vmsBefore = (await call<string[]>("VM.get_all")).length;
    const sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
    const result = await xapi.putResource(testXva({ name: "via xen-api", disks: [d] }), "/import/", { query: { sr_id: sr } });
    const vm = /OpaqueRef:[0-9a-f-]+/.exec(String(result))?.[0];
    assert.ok(vm !== undefined, `task result names the VM: ${String(result)}`);
    assert.equal((await call<string[]>("VM.get_all")).length, vmsBefore + 1, "the probe made nothing; the import made one VM");
    assert.equal(await call("VM.get_name_label", vm), "via xen-api");
    assert.ok((await readVdi(host.service.ts, await diskOf(vm), d)).equals(diskBytes(d)));

    const response = await xapi.getResource("/export/", { query: { ref: vm, use_compression: "zstd" } });
    const exported = await collect(response.body);
    const back = await importedVmFrom(exported);
    assert.ok((await readVdi(host.service.ts, await diskOf(back), d)).equals(diskBytes(d)));
  });

  test("xen-api putResource of a VHD and of a raw disk into a VDI, with their lengths, as importContent calls /import_raw_vdi; getResource of it as VHD, as exportContent calls /export_raw_vdi", async () => {
    const raw = Buffer.alloc(8 * MiB);
    patternBlock(41).copy(raw, 0);
    patternBlock(42).copy(raw, 6 * MiB + 512);
    await writeFile(join(work, "xo.raw"), raw);
    await run("qemu-img", ["convert", "-f", "raw", "-O", "vpc", "-o", "subformat=dynamic,force_size=on", join(work, "xo.raw"), join(work, "xo.vhd")]);
    const vhd = await readFile(join(work, "xo.vhd"));
    const sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
    for (const [format, body] of [["vhd", vhd], ["raw", raw]] as const) {
      const vdi = await call<string>("VDI.create", { SR: sr, virtual_size: raw.length, name_label: `xo ${format}`, type: "user", sharable: false, read_only: false, other_config: {} });
      await xapi.putResource(Object.assign(Readable.from([body]), { length: body.length }), "/import_raw_vdi/", { query: { format, vdi } });
      assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw), format);
      if (format !== "vhd") continue;
      const response = await xapi.getResource("/export_raw_vdi/", { query: { format: "vhd", vdi } });
      await writeFile(join(work, "xo-export.vhd"), await collect(response.body));
      await run("qemu-img", ["compare", "-f", "vpc", "-F", "raw", join(work, "xo-export.vhd"), join(work, "xo.raw")]);
    }
  });

  test("@xen-orchestra/xva's writer makes an archive that imports with identical disk bytes", async () => {
    const size = 16 * MiB;
    const raw = Buffer.alloc(size);
    patternBlock(31).copy(raw, 0);
    patternBlock(32).copy(raw, 7 * MiB + 4096);
    const sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
    const srRecord = await call<Record<string, unknown>>("SR.get_record", sr);
    const network = (await call<string[]>("network.get_all"))[0]!;
    const vm = await xoImportVm(
      {
        name_label: "from XO",
        memory: 1024 * MiB,
        nCpus: 2,
        firmware: "bios",
        vdis: [{ name_label: "xo disk", name_description: "", virtual_size: size }],
        vhds: [{ rawContent: async () => Readable.from([raw], { objectMode: false }), footer: { currentSize: size } }],
        networks: [{ name_label: "eth0", macAddress: "aa:bb:cc:00:00:01" }],
      },
      // What Xen Orchestra hands it: its Xapi (`@xen-orchestra/xapi`, built on this client) with task_create.
      Object.assign(Object.create(xapi) as Xapi, { task_create: (label: string) => xapi.call("task.create", label, "") }),
      { ...srRecord, $ref: sr },
      { ...(await call<Record<string, unknown>>("network.get_record", network)), $ref: network },
    );
    assert.equal(await call("VM.get_name_label", vm), "from XO");
    assert.ok((await readVdi(host.service.ts, await diskOf(vm))).equals(raw));
  });
});

describe("Debian tools", () => {
  let vm: string;
  let d: TestDisk;
  let exported: string;
  before(async () => {
    d = disk();
    vm = await importedVmFrom(await collect(testXva({ name: "for tools", disks: [d] })));
    exported = join(work, "vm.xva");
    await run("curl", ["-sSf", "-o", exported, `${host.client.url}/export?session_id=${host.client.session}&ref=${vm}`]);
  });

  test("curl downloads an export that GNU tar lists cleanly, whose checksums match xxhsum -H64", async () => {
    const { stdout } = await run("tar", ["-tvf", exported]);
    const names = stdout.trim().split("\n").map((line) => line.split(/\s+/).at(-1)!);
    assert.equal(names[0], "ova.xml");
    const vdi = names.find((n) => n.endsWith("/00000000"))!.split("/")[0]!;
    assert.deepEqual(names.slice(1), ["00000000", "00000009", "00000023"].flatMap((n) => [`${vdi}/${n}`, `${vdi}/${n}.xxhash`]));
    const dir = join(work, "extracted");
    await mkdir(dir);
    await run("tar", ["-xf", exported, "-C", dir]);
    for (const n of ["00000000", "00000009", "00000023"]) {
      const { stdout: sum } = await run("xxhsum", ["-H64", join(dir, vdi, n)]);
      const expected = (await readFile(join(dir, vdi, `${n}.xxhash`), "utf8")).trim();
      assert.equal(sum.split(/\s+/)[0]!.toUpperCase(), expected, n);
    }
  });

  test("xva-img extracts the disk from our export byte-identical", async () => {
    const dir = join(work, "for-xva-img");
    await mkdir(dir);
    // xva-img reads SHA-1 checksums: the export it gets asks for them, as an old importer would.
    const sha1 = join(work, "vm-sha1.xva");
    await run("curl", ["-sSf", "-o", sha1, `${host.client.url}/export?session_id=${host.client.session}&ref=${vm}&checksum=sha1`]);
    await run("tar", ["-xf", sha1, "-C", dir]);
    const vdi = (await readdir(dir)).find((n) => n.startsWith("Ref:"))!;
    const out = join(work, "disk.raw");
    await run("xva-img", ["disk-export", join(dir, vdi), out]);
    const raw = await readFile(out);
    assert.ok(raw.subarray(0, d.size).equals(diskBytes(d)));
  });

  test("an archive packaged by xva-img (V7 headers, .checksum members) imports", async () => {
    const dir = join(work, "xva-img-package");
    await mkdir(dir);
    const size = 6 * MiB;
    const raw = Buffer.alloc(size);
    patternBlock(41).copy(raw, 0);
    patternBlock(42).copy(raw, 4 * MiB);
    await writeFile(join(dir, "disk.raw"), raw);
    const { objects, version } = vmObjects({ name: "from xva-img", disks: [{ size, blocks: new Map() }] });
    await writeFile(join(dir, "ova.xml"), formatOvaXml({ version, objects }));
    const vdi = objects.find((o) => o.class === "VDI")!.id;
    await mkdir(join(dir, vdi));
    await run("xva-img", ["disk-import", join(dir, vdi), join(dir, "disk.raw")]);
    const members = (await readdir(join(dir, vdi))).sort().map((n) => `${vdi}/${n}`);
    assert.ok(members.some((m) => m.endsWith(".checksum")));
    // xva-img names each member by its path less the first component: "./ova.xml" → "ova.xml".
    await run("xva-img", ["package", join(work, "packaged.xva"), "./ova.xml", ...members.map((m) => `./${m}`)], { cwd: dir });
    const made = await importedVmFrom(await readFile(join(work, "packaged.xva")));
    assert.equal(await call("VM.get_name_label", made), "from xva-img");
    assert.ok((await readVdi(host.service.ts, await diskOf(made))).equals(raw));
  });

  test("curl -T uploads an archive (Expect: 100-continue, a real Content-Length)", async () => {
    const d2: TestDisk = { size: 3 * MiB, blocks: new Map([[1, patternBlock(51)]]) };
    const file = join(work, "upload.xva");
    await writeFile(file, await collect(testXva({ name: "curl upload", disks: [d2] })));
    const child = spawn("curl", ["-sSf", "-D", "-", "-T", file, `${host.client.url}/import?session_id=${host.client.session}`]);
    const headers = (await collect(child.stdout)).toString();
    const task = /^task-id: (\S+)/im.exec(headers)?.[1];
    assert.ok(task !== undefined, headers);
    const record = await host.client.waitTask(task);
    assert.equal(record.status, "success", JSON.stringify(record.error_info));
    const made = (parseXmlRpcValue(String(record.result)) as string[])[0]!;
    assert.ok((await readVdi(host.service.ts, await diskOf(made), d2)).equals(diskBytes(d2)));
  });
});

describe("HTTPS", () => {
  test("curl -T uploads and curl downloads over HTTPS (the self-signed certificate of the data dir)", async () => {
    const secure = await startTestToolstack({ httpsPort: 0 });
    try {
      const base = `https://127.0.0.1:${secure.service.httpsPort}`;
      const d: TestDisk = { size: 4 * MiB, blocks: new Map([[2, patternBlock(71)]]) };
      const file = join(work, "https.xva");
      await writeFile(file, await collect(testXva({ name: "over https", disks: [d] })));
      const { stdout } = await run("curl", ["-ksSf", "-D", "-", "-o", "/dev/null", "-T", file, `${base}/import?session_id=${secure.client.session}`]);
      const task = /^task-id: (\S+)/im.exec(stdout)?.[1];
      assert.ok(task !== undefined, stdout);
      const record = await secure.client.waitTask(task);
      assert.equal(record.status, "success", JSON.stringify(record.error_info));
      const vm = (parseXmlRpcValue(String(record.result)) as string[])[0]!;
      const out = join(work, "https-export.xva");
      await run("curl", ["-ksSf", "-o", out, `${base}/export?session_id=${secure.client.session}&ref=${vm}&use_compression=gzip`]);
      const { stdout: listing } = await run("tar", ["-tzf", out]);
      assert.match(listing, /^ova\.xml\n/);
      assert.match(listing, /\/00000002\.xxhash/);
    } finally {
      await secure.stop();
      // A second host took over the environment its plugins read: give it back to this file's host.
      process.env.HANGAR_DATA_DIR = host.dataDir;
    }
  });
});
