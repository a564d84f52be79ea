// PUT /import_raw_vdi over real HTTP against a toolstack with a file SR: VHD, qcow2, VMDK and VHDX images Debian's
// qemu-img writes into a new VDI and over one full of garbage, raw bodies, xapi's chunked framing from a
// Python script (Xen Orchestra's xen-api client: peers.test.ts); refusals as xapi answers them, and
// bad bodies failing in words with nothing half-made left.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { sampleDisk } from "../../disk/testing.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { locateVdi } from "../vdi-records.ts";
import { http, MiB, readVdi } from "./testing.ts";
import { openVolume } from "./volume-io.ts";

let host: TestToolstack;
let dir: string;
let sr: string;

before(async () => {
  host = await startTestToolstack();
  dir = mkdtempSync(join(tmpdir(), "hangar-disk-import-"));
  sr = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
});
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});

const call = <T = unknown>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);

/** `raw` converted by qemu-img into `format` with `options`; answers the file's bytes. */
function qemuImage(raw: Buffer, name: string, format: string, options: string[] = []): Buffer {
  const source = join(dir, `${name}.raw`);
  writeFileSync(source, raw);
  const image = join(dir, `${name}.${format}`);
  execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, source, image]);
  return readFileSync(image);
}

/** PUT /import_raw_vdi with `query`; answers the HTTP answer and, when it started one, the task's record. */
async function importDisk(query: string, body: Buffer | Readable, headers: Record<string, string> = {}) {
  const answer = await http(`${host.client.url}/import_raw_vdi?session_id=${host.client.session}&${query}`, { method: "PUT", body, headers });
  const task = answer.headers["task-id"] as string | undefined;
  return { answer, task: task === undefined ? undefined : await host.client.waitTask(task) };
}

const length = (body: Buffer) => ({ "content-length": String(body.length) });
const vdiCount = async () => (await call<string[]>("VDI.get_all")).length;

/** A new VDI of `size` bytes, every byte 0xAA: a target that held something. */
async function garbageVdi(size: number): Promise<string> {
  const vdi = await call<string>("VDI.create", { SR: sr, virtual_size: size, name_label: "held something", type: "user", sharable: false, read_only: false, other_config: {} });
  const located = await locateVdi(host.service.ts, vdi);
  const volume = await openVolume(host.service.ts, located.sr, located.key, "rw");
  try {
    for (let at = 0; at < size; at += 4 * MiB) await volume.client.write(at, Buffer.alloc(Math.min(4 * MiB, size - at), 0xaa));
    await volume.client.flush();
  } finally {
    await volume.close();
  }
  return vdi;
}

describe("PUT /import_raw_vdi", () => {
  const raw = sampleDisk();

  test("a dynamic VHD from qemu-img becomes a new VDI of its virtual size ('Imported VDI'), byte for byte; the task's result is the VDI", async () => {
    const vhd = qemuImage(raw, "dynamic", "vpc", ["-o", "subformat=dynamic,force_size=on"]);
    const { answer, task } = await importDisk(`sr_id=${sr}&format=VHD`, vhd, length(vhd));
    assert.equal(answer.status, 200);
    assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
    const vdi = String(task!.result).match(/OpaqueRef:[0-9a-f-]+/)![0];
    const record = await call<Record<string, unknown>>("VDI.get_record", vdi);
    assert.equal(record.name_label, "Imported VDI");
    assert.equal(record.virtual_size, raw.length);
    assert.ok(Number(record.physical_utilisation) < 16 * MiB, `holes stay holes: ${String(record.physical_utilisation)} bytes used`);
    assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw));
  });

  test("a fixed VHD and a dynamic one written over a VDI full of 0xAA: what the image leaves out reads as zeros (no pre-zeroed target needed)", async () => {
    for (const subformat of ["fixed", "dynamic"]) {
      const vhd = qemuImage(raw, subformat, "vpc", ["-o", `subformat=${subformat},force_size=on`]);
      const vdi = await garbageVdi(raw.length);
      const uuid = await call<string>("VDI.get_uuid", vdi);
      // By uuid, as xapi takes `vdi` when it is no ref.
      const { task } = await importDisk(`vdi=${uuid}&format=vhd`, vhd, length(vhd));
      assert.equal(task!.status, "success", `${subformat}: ${JSON.stringify(task!.error_info)}`);
      assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw), subformat);
    }
  });

  test("qcow2 from qemu-img (compressed, v2 and v3) into a new VDI, and over a VDI full of 0xAA; sent chunked without a length", async () => {
    for (const options of [["-c"], ["-o", "compat=0.10"], ["-o", "compat=1.1"]]) {
      const qcow2 = qemuImage(raw, `q${options.join("")}`.replace(/\W+/g, "-"), "qcow2", options);
      const made = await importDisk(`sr_id=${sr}&format=qcow2`, qcow2, length(qcow2));
      assert.equal(made.task!.status, "success", `${options.join(" ")}: ${JSON.stringify(made.task!.error_info)}`);
      const vdi = String(made.task!.result).match(/OpaqueRef:[0-9a-f-]+/)![0];
      assert.equal(await call("VDI.get_virtual_size", vdi), raw.length);
      assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw), options.join(" "));
      const held = await garbageVdi(raw.length);
      const into = await importDisk(`vdi=${held}&format=qcow2`, Readable.from([qcow2]));
      assert.equal(into.task!.status, "success", JSON.stringify(into.task!.error_info));
      assert.ok((await readVdi(host.service.ts, held)).subarray(0, raw.length).equals(raw), `${options.join(" ")} over garbage`);
    }
  });

  test("VMDK (monolithicSparse, streamOptimized) and VHDX from qemu-img into new VDIs and over VDIs full of 0xAA; the VHDX kept aside is removed", async () => {
    const images: Array<[string, string, string[]]> = [
      ["vmdk", "vmdk", ["-o", "subformat=monolithicSparse"]],
      ["vmdk", "vmdk", ["-o", "subformat=streamOptimized"]],
      ["vhdx", "vhdx", []],
    ];
    for (const [format, qemuFormat, options] of images) {
      const what = `${format} ${options.join(" ")}`;
      const bytes = qemuImage(raw, what.replace(/\W+/g, "-"), qemuFormat, options);
      const made = await importDisk(`sr_id=${sr}&format=${format}`, bytes, length(bytes));
      assert.equal(made.task!.status, "success", `${what}: ${JSON.stringify(made.task!.error_info)}`);
      const vdi = String(made.task!.result).match(/OpaqueRef:[0-9a-f-]+/)![0];
      assert.equal(await call("VDI.get_virtual_size", vdi), raw.length, what);
      assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw), what);
      const held = await garbageVdi(raw.length);
      const into = await importDisk(`vdi=${held}&format=${format}`, Readable.from([bytes]));
      assert.equal(into.task!.status, "success", `${what} over garbage: ${JSON.stringify(into.task!.error_info)}`);
      assert.ok((await readVdi(host.service.ts, held)).subarray(0, raw.length).equals(raw), `${what} over garbage`);
    }
    assert.deepEqual(readdirSync(join(host.service.ts.dataDir, "spill")), [], "nothing is left kept aside");
  });

  test("raw: a new VDI of the body's Content-Length; into a VDI, the body at offset 0 and the rest as it was", async () => {
    const body = raw.subarray(0, 8 * MiB);
    const { task } = await importDisk(`sr_id=${sr}`, body, length(body));
    assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
    const made = String(task!.result).match(/OpaqueRef:[0-9a-f-]+/)![0];
    assert.equal(await call("VDI.get_virtual_size", made), body.length);
    assert.ok((await readVdi(host.service.ts, made)).subarray(0, body.length).equals(body));

    const vdi = await garbageVdi(16 * MiB);
    const into = await importDisk(`vdi=${vdi}&format=raw`, body, length(body));
    assert.equal(into.task!.status, "success", JSON.stringify(into.task!.error_info));
    const bytes = await readVdi(host.service.ts, vdi);
    assert.ok(bytes.subarray(0, body.length).equals(body));
    assert.ok(bytes.subarray(body.length, 16 * MiB).every((byte) => byte === 0xaa), "past the body: as it was");
  });

  test("chunked=true: frames a Python script writes from a sparse file land at their offsets; what no frame covers stays", async () => {
    const vdi = await garbageVdi(16 * MiB);
    const script = `
import struct, sys
out = sys.stdout.buffer
for offset, byte, length in [(5 * 1048576, 0x11, 1048576), (0, 0x22, 4096), (15 * 1048576 + 512, 0x33, 1000)]:
    out.write(struct.pack("<QI", offset, length) + bytes([byte]) * length)
out.write(struct.pack("<QI", 0, 0))
`;
    const body = execFileSync("python3", ["-c", script], { maxBuffer: 64 * MiB });
    const { task } = await importDisk(`vdi=${vdi}&chunked`, body);
    assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
    const bytes = await readVdi(host.service.ts, vdi);
    const expected = Buffer.alloc(16 * MiB, 0xaa);
    expected.fill(0x11, 5 * MiB, 6 * MiB);
    expected.fill(0x22, 0, 4096);
    expected.fill(0x33, 15 * MiB + 512, 15 * MiB + 1512);
    assert.ok(bytes.subarray(0, 16 * MiB).equals(expected));
  });

  test("format=tar: xapi's one-disk layout as Python's tarfile writes it (1 MiB members, gaps for zero blocks, SHA-1 .checksum siblings) over a VDI full of 0xAA; a bad checksum, a VM export and a second disk fail in words", async () => {
    const vdi = await garbageVdi(raw.length);
    const rawFile = join(dir, "tar-source.raw");
    writeFileSync(rawFile, raw);
    const script = `
import hashlib, io, sys, tarfile
data = open(sys.argv[1], "rb").read()
mode, blocks = sys.argv[2], len(data) // 1048576
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.USTAR_FORMAT)
def member(name, payload):
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    out.addfile(info, io.BytesIO(payload))
if mode == "xva":
    member("ova.xml", b"<value/>")
for i in range(blocks):
    block = data[i * 1048576:(i + 1) * 1048576]
    if block.count(0) == len(block) and 0 < i < blocks - 1:
        continue
    prefix = "Ref:2/" if mode == "two" and i == blocks - 1 else "Ref:1/"
    member(prefix + "%08d" % i, block)
    digest = hashlib.sha1(block).hexdigest()
    member(prefix + "%08d.checksum" % i, (digest if mode != "bad" or i != 2 else "0" * 40).encode())
out.close()
`;
    const tar = (mode: string) => execFileSync("python3", ["-c", script, rawFile, mode], { maxBuffer: 128 * MiB });
    const { task } = await importDisk(`vdi=${vdi}&format=tar`, tar("good"));
    assert.equal(task!.status, "success", JSON.stringify(task!.error_info));
    assert.ok((await readVdi(host.service.ts, vdi)).subarray(0, raw.length).equals(raw));
    const cases: Array<[string, RegExp]> = [
      ["bad", /Ref:1\/00000002.*checksum/],
      ["xva", /begins with ova.xml: it is a VM export/],
      ["two", /a second disk \(Ref:2, after Ref:1\)/],
    ];
    for (const [mode, reason] of cases) {
      const failed = await importDisk(`vdi=${vdi}&format=tar`, tar(mode));
      assert.equal(failed.task!.status, "failure", mode);
      assert.match((failed.task!.error_info as string[])[1]!, reason, mode);
    }
  });

  test("refusals before the body, as xapi answers them: 401 with a realm, 404 for an unknown format or chunked VHD, 400 without a VDI or SR, 404 for an unknown VDI", async () => {
    const body = Buffer.alloc(MiB, 1);
    const unauthorised = await http(`${host.client.url}/import_raw_vdi?sr_id=${sr}`, { method: "PUT", body, headers: length(body) });
    assert.equal(unauthorised.status, 401);
    assert.match(String(unauthorised.headers["www-authenticate"]), /^Basic realm=/);
    const cases: Array<[string, number, RegExp]> = [
      [`sr_id=${sr}&format=qcow`, 404, /Unknown format qcow/],
      [`sr_id=${sr}&format=vhd&chunked=true`, 404, /Cannot handle chunked vhd/],
      ["format=raw", 400, /needs vdi=/],
      [`sr_id=${sr}&chunked=true`, 400, /Not enough info supplied to import/],
      [`sr_id=${sr}&format=tar`, 400, /a tar does not say its disk's size/],
      ["vdi=7b0a4a70-0000-4000-8000-000000000000", 404, /UUID_INVALID|HANDLE_INVALID/],
      ["vdi=OpaqueRef:nope", 404, /HANDLE_INVALID/],
    ];
    const before = await vdiCount();
    for (const [query, status, reason] of cases) {
      const taskRef = await call<string>("task.create", "import", "");
      const { answer } = await importDisk(`${query}&task_id=${taskRef}`, body, length(body));
      assert.equal(answer.status, status, query);
      assert.match(answer.body.toString(), reason, query);
      const task = await call<Record<string, unknown>>("task.get_record", taskRef);
      assert.equal(task.status, "failure", `${query}: the caller's task fails with the reason`);
    }
    assert.equal(await vdiCount(), before);
  });

  test("bad bodies fail the task in words naming the byte, and leave no VDI made; a given VDI is left as written, and the error says so", async () => {
    const vhd = qemuImage(raw, "bad", "vpc", ["-o", "subformat=dynamic,force_size=on"]);
    const qcow2 = qemuImage(raw.subarray(0, 4 * MiB), "other", "qcow2");
    const before = await vdiCount();
    const cases: Array<[string, Buffer, RegExp]> = [
      ["a qcow2 sent as vhd", qcow2, /a qcow2 image \(its magic number says so\), not vhd: import it with format=qcow2/],
      ["a qcow2 sent as raw", qcow2, /a qcow2 image .* not raw/],
      ["a VHD cut inside a block", vhd.subarray(0, 4 * MiB), /BAT entry \d+ points at a block ending at byte \d+, past the file's data .*\(at byte \d+\)/],
      ["a bad footer checksum", Buffer.concat([vhd.subarray(0, 64), Buffer.from([0, 0, 0, 1]), vhd.subarray(68)]), /bad footer checksum.*at byte 64/],
    ];
    for (const [what, body, reason] of cases) {
      const format = what.endsWith("raw") ? "raw" : "vhd";
      const { task } = await importDisk(`sr_id=${sr}&format=${format}`, body, length(body));
      assert.equal(task!.status, "failure", what);
      assert.equal((task!.error_info as string[])[0], "IMPORT_ERROR", what);
      assert.match((task!.error_info as string[])[1]!, reason, what);
    }
    assert.equal(await vdiCount(), before, "no VDI made is left");

    const vdi = await garbageVdi(raw.length);
    const cut = vhd.subarray(0, 4 * MiB);
    // Without its length: the zeros of the blocks it leaves out are written before the cut is found.
    const { task } = await importDisk(`vdi=${vdi}&format=vhd`, Readable.from([cut]));
    assert.equal(task!.status, "failure");
    assert.match((task!.error_info as string[])[1]!, new RegExp(`the VDI ${vdi} keeps the \\d+ bytes of the image written before the failure`));
    assert.equal(await vdiCount(), before + 1, "the given VDI stays");

    const tooBig = Buffer.alloc(raw.length + MiB, 7);
    const over = await importDisk(`vdi=${vdi}`, tooBig, length(tooBig));
    assert.match((over.task!.error_info as string[])[1]!, new RegExp(`the body goes on past the disk's ${raw.length} bytes \\(at byte ${raw.length}\\)`));

    const empty = await importDisk(`vdi=${vdi}&task_id=${await call<string>("task.create", "import", "")}`, Buffer.alloc(0), { "content-length": "0" });
    assert.equal(empty.answer.status, 400);
  });

  test("a VDI another import is writing is refused: OTHER_OPERATION_IN_PROGRESS", async () => {
    const vdi = await garbageVdi(8 * MiB);
    // The first import's body stalls half-way, holding the VDI.
    const stalled = new Readable({ read() {} });
    stalled.push(Buffer.alloc(MiB, 1));
    const first = http(`${host.client.url}/import_raw_vdi?session_id=${host.client.session}&vdi=${vdi}`, { method: "PUT", body: stalled, headers: { "content-length": String(8 * MiB) } });
    let second: Awaited<ReturnType<typeof importDisk>> | undefined;
    for (let tries = 0; tries < 50; tries++) {
      second = await importDisk(`vdi=${vdi}`, Buffer.alloc(MiB, 2), { "content-length": String(MiB) });
      if (second.task!.status === "failure") break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal((second!.task!.error_info as string[])[0], "OTHER_OPERATION_IN_PROGRESS");
    stalled.push(Buffer.alloc(7 * MiB, 1));
    stalled.push(null);
    const answer = await first;
    const task = await host.client.waitTask(String(answer.headers["task-id"]));
    assert.equal(task.status, "success", JSON.stringify(task.error_info));
  });
});
