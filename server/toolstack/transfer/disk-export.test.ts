// GET /export_raw_vdi over real HTTP against a toolstack with a file SR: every format read back by Debian's
// qemu-img (info, check, compare) or imported back; deltas against a snapshot rebuilt on a clone of it (by
// qemu-img through the backing file for qcow2 and VMDK, by /import_raw_vdi for VHD, chunked raw and tar);
// resume by offset and ETag; refusals as xapi answers them.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { sampleDisk } from "../../disk/testing.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { type LocatedVdi, locateVdi } from "../vdi-records.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { prepareDiskExport } from "./disk-export.ts";
import { http, MiB, readVdi } from "./testing.ts";
import { openVolume } from "./volume-io.ts";

let host: TestToolstack;
let dir: string;
let sr: string;
const raw = sampleDisk();
let vdi: string;
let uuid: string;

const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);

async function writeVdi(ref: string, offset: number, data: Buffer): Promise<void> {
  const located = await locateVdi(host.service.ts, ref);
  const volume = await openVolume(host.service.ts, located.sr, located.key, "rw");
  try {
    await volume.client.write(offset, data);
    await volume.client.flush();
  } finally {
    await volume.close();
  }
}

async function newVdi(size: number, name: string): Promise<string> {
  return call<string>("VDI.create", { SR: sr, virtual_size: size, name_label: name, type: "user", sharable: false, read_only: false, other_config: {} });
}

before(async () => {
  host = await startTestToolstack();
  dir = mkdtempSync(join(tmpdir(), "hangar-disk-export-"));
  sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
  vdi = await newVdi(raw.length, "exported");
  uuid = await call<string>("VDI.get_uuid", vdi);
  for (let at = 0; at < raw.length; at += 4 * MiB) {
    const piece = raw.subarray(at, at + 4 * MiB);
    if (piece.some((byte) => byte !== 0)) await writeVdi(vdi, at, piece);
  }
  writeFileSync(join(dir, "disk.raw"), raw);
});
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** GET /export_raw_vdi with `query`; answers the HTTP answer and the task's record. */
async function exportDisk(query: string, method = "GET") {
  const answer = await http(`${host.client.url}/export_raw_vdi?session_id=${host.client.session}&${query}`, { method });
  const task = answer.headers["task-id"] as string | undefined;
  return { answer, task: task === undefined ? undefined : await host.client.waitTask(task) };
}

/** The export saved as `name`; its path. */
async function saved(query: string, name: string): Promise<string> {
  const { answer, task } = await exportDisk(query);
  assert.equal(answer.status, 200, answer.body.toString());
  assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
  const file = join(dir, name);
  writeFileSync(file, answer.body);
  return file;
}

const QEMU_FORMAT = { vhd: "vpc", qcow2: "qcow2", vmdk: "vmdk" } as const;

describe("GET /export_raw_vdi", () => {
  test("raw, vhd, qcow2 and vmdk: named <uuid>.<format> with xapi's content types; qemu-img reads each as the disk (and checks the qcow2 and vmdk)", async () => {
    const types = { raw: "application/octet-stream", vhd: "application/vhd", qcow2: "application/x-qemu-disk", vmdk: "application/x-vmdk" };
    for (const [format, type] of Object.entries(types)) {
      const { answer, task } = await exportDisk(`vdi=${uuid}&format=${format.toUpperCase()}`);
      assert.equal(answer.status, 200);
      assert.equal(answer.headers["content-type"], type);
      assert.equal(answer.headers["content-disposition"], `attachment; filename="${uuid}.${format}"`);
      assert.equal(task!.status, "success", `${format}: ${JSON.stringify(task!.error_info)}`);
      const file = join(dir, `${uuid}.${format}`);
      writeFileSync(file, answer.body);
      if (format === "raw") {
        assert.ok(answer.body.equals(raw));
        continue;
      }
      const qemuFormat = QEMU_FORMAT[format as keyof typeof QEMU_FORMAT];
      const info = JSON.parse(execFileSync("qemu-img", ["info", "--output=json", "-f", qemuFormat, file], { encoding: "utf8" })) as { "virtual-size": number };
      assert.equal(info["virtual-size"], raw.length, format);
      if (format !== "vhd") execFileSync("qemu-img", ["check", "-f", qemuFormat, file], { stdio: "pipe" });
      execFileSync("qemu-img", ["compare", "-f", qemuFormat, "-F", "raw", file, join(dir, "disk.raw")], { stdio: "pipe" });
    }
  });

  test("every format imported back through /import_raw_vdi into a VDI full of 0xAA is the disk; tar is xapi's one-disk layout with xxhash members", async () => {
    for (const format of ["raw", "vhd", "qcow2", "vmdk", "tar"]) {
      const { answer } = await exportDisk(`vdi=${vdi}&format=${format}`);
      const target = await newVdi(raw.length, `back-${format}`);
      await writeVdi(target, 0, Buffer.alloc(raw.length, 0xaa));
      const back = await http(`${host.client.url}/import_raw_vdi?session_id=${host.client.session}&vdi=${target}&format=${format}`, { method: "PUT", body: answer.body, headers: { "content-length": String(answer.body.length) } });
      const task = await host.client.waitTask(String(back.headers["task-id"]));
      assert.equal(task.status, "success", `${format}: ${JSON.stringify(task.error_info)}`);
      assert.ok((await readVdi(host.service.ts, target)).subarray(0, raw.length).equals(raw), format);
      if (format === "tar") {
        const names = execFileSync("tar", ["-t"], { input: answer.body, encoding: "utf8" }).trim().split("\n");
        assert.deepEqual(names.slice(0, 3), ["vdi/00000000", "vdi/00000000.xxhash", "vdi/00000001"]);
        assert.ok(names.includes("vdi/00000039"), "the last block always comes");
        assert.ok(!names.includes("vdi/00000010"), "zero blocks are left out");
      }
    }
  });

  test("a delta against a snapshot, in every format, rebuilds the newer disk on a clone of the snapshot", async () => {
    const base = await call<string>("VDI.snapshot", vdi, {});
    const baseUuid = await call<string>("VDI.get_uuid", base);
    const newer = Buffer.from(raw);
    const changes: Array<[number, Buffer]> = [
      [5 * MiB, Buffer.alloc(MiB, 0x31)],
      [20 * MiB + 4096, Buffer.alloc(8192, 0x32)],
      [MiB, Buffer.alloc(MiB, 0)],
    ];
    for (const [at, data] of changes) {
      data.copy(newer, at);
      await writeVdi(vdi, at, data);
    }
    writeFileSync(join(dir, "newer.raw"), newer);
    for (const format of ["qcow2", "vmdk"]) {
      await saved(`vdi=${base}&format=${format}`, `${baseUuid}.${format}`);
      const delta = await saved(`vdi=${vdi}&base=${baseUuid}&format=${format}`, `delta.${format}`);
      const qemuFormat = QEMU_FORMAT[format as keyof typeof QEMU_FORMAT];
      const chain = execFileSync("qemu-img", ["info", "--backing-chain", "-f", qemuFormat, delta], { encoding: "utf8" });
      assert.match(chain, new RegExp(`${baseUuid}\\.${format}`), format);
      execFileSync("qemu-img", ["compare", "-f", qemuFormat, "-F", "raw", delta, join(dir, "newer.raw")], { stdio: "pipe" });
    }
    for (const format of ["vhd", "raw", "tar", "qcow2"]) {
      const { answer, task } = await exportDisk(`vdi=${vdi}&base=${base}&format=${format}`);
      assert.equal(task!.status, "success", `${format}: ${JSON.stringify(task!.error_info)}`);
      assert.ok(answer.body.length < raw.length / 2, `${format}: the delta carries the changes only (${answer.body.length} bytes)`);
      if (format === "qcow2") continue;
      const clone = await call<string>("VDI.clone", base, {});
      const query = format === "raw" ? "chunked=true" : `format=${format}`;
      const applied = await http(`${host.client.url}/import_raw_vdi?session_id=${host.client.session}&vdi=${clone}&${query}`, { method: "PUT", body: answer.body, headers: { "content-length": String(answer.body.length) } });
      const done = await host.client.waitTask(String(applied.headers["task-id"]));
      assert.equal(done.status, "success", `${format}: ${JSON.stringify(done.error_info)}`);
      assert.ok((await readVdi(host.service.ts, clone)).subarray(0, raw.length).equals(newer), `${format} applied on a clone of the base`);
    }
    Buffer.from(newer).copy(raw);
  });

  test("resumed by offset and ETag: the rest of the same bytes; another ETag is 412; HEAD answers the headers alone", async () => {
    const whole = await exportDisk(`vdi=${vdi}&format=vhd`);
    const etag = String(whole.answer.headers.etag);
    const offset = 3 * MiB + 17;
    const rest = await exportDisk(`vdi=${vdi}&format=vhd&offset=${offset}&etag=${encodeURIComponent(etag)}`);
    assert.equal(rest.answer.status, 200);
    assert.ok(rest.answer.body.equals(whole.answer.body.subarray(offset)));
    const other = await exportDisk(`vdi=${vdi}&format=qcow2&offset=${offset}&etag=${encodeURIComponent(etag)}`);
    assert.equal(other.answer.status, 412);
    const head = await exportDisk(`vdi=${vdi}&format=tar`, "HEAD");
    assert.equal(head.answer.status, 200);
    assert.equal(head.answer.body.length, 0);
    assert.equal(head.answer.headers["content-disposition"], `attachment; filename="${uuid}.tar"`);
  });

  test("refusals: 401 with a realm, 404 for an unknown format or VDI, 400 without a VDI or with a base of another chain", async () => {
    const unauthorised = await http(`${host.client.url}/export_raw_vdi?vdi=${vdi}`);
    assert.equal(unauthorised.status, 401);
    assert.match(String(unauthorised.headers["www-authenticate"]), /^Basic realm=/);
    const stranger = await newVdi(8 * MiB, "another chain");
    const cases: Array<[string, number, RegExp]> = [
      [`vdi=${vdi}&format=vhdx`, 404, /Unknown format vhdx/],
      ["vdi=OpaqueRef:nope", 404, /HANDLE_INVALID/],
      ["format=raw", 400, /an export needs vdi=/],
      [`vdi=${vdi}&base=${stranger}&format=vhd`, 400, /VDI_INCOMPATIBLE_TYPE.*not of the chain/],
    ];
    for (const [query, status, reason] of cases) {
      const taskRef = await call<string>("task.create", "export", "");
      const { answer } = await exportDisk(`${query}&task_id=${taskRef}`);
      assert.equal(answer.status, status, query);
      assert.match(answer.body.toString(), reason, query);
      assert.equal(await call("task.get_status", taskRef), "failure", query);
    }
  });
});

describe("prepareDiskExport", () => {
  test("a VHD of a disk over 2040 GiB is refused VDI_TOO_LARGE, as xapi does; the other formats take it", () => {
    const huge = { vdi: { ref: "OpaqueRef:huge" } as LocatedVdi, uuid: "0b0e7e59-0000-4000-8000-000000000001", virtualSize: 2041 * 1024 ** 3, snapshotTime: new Date(0) };
    assert.throws(
      () => prepareDiskExport(huge, undefined, "vhd"),
      (error: unknown) => error instanceof XenApiError && error.code === "VDI_TOO_LARGE" && error.params[0] === "OpaqueRef:huge" && error.params[1] === String(2040 * 1024 ** 3),
    );
    for (const format of ["raw", "qcow2", "vmdk", "tar"] as const) assert.equal(prepareDiskExport(huge, undefined, format).format, format);
  });
});
