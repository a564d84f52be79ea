// GET /export?format=ova against a real toolstack: the OVA unpacked by GNU tar (members in order: ovf, VMDKs,
// mf), each VMDK compared by Debian's qemu-img with the VM's disk, the manifest checked by sha256sum, the OVF
// imported back by Hangar's own importer into an equal VM; resumed by offset + etag to the same bytes.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { z } from "zod";
import { sampleDisk } from "../../disk/testing.ts";
import { writeOvf } from "../../ova/descriptor-writer.ts";
import { importOva, type ImportTarget } from "../../ova/import.ts";
import { bufferSource, manifestOf, qemuImage, tarOf } from "../../ova/testing.ts";
import { XenApiClient } from "../../xenapi/client.ts";
import { startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { http, MiB, readVdi } from "./testing.ts";

let host: TestToolstack;
let xapi: XenApiClient;
let dir: string;
let sr: string;
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});
before(async () => {
  host = await startTestToolstack();
  xapi = new XenApiClient(host.client.url, host.client.session);
  dir = mkdtempSync(join(tmpdir(), "hangar-ova-export-"));
  sr = await host.client.call<string>("pool.get_default_SR", (await host.client.call<string[]>("pool.get_all"))[0]);
});

const anyRecord = z.record(z.string(), z.any());
const target = (mark: string): ImportTarget => ({ xapi, toolstack: host.client.url, sr, mark, force: false, signal: AbortSignal.timeout(120_000) });

/** The facts two VMs must share: name, memory, vCPUs, firmware, drives in order with their sizes, NIC MACs. */
async function facts(vm: string) {
  const record = await xapi.call(anyRecord, "VM.get_record", vm);
  const vbds = await Promise.all((record.VBDs as string[]).map((ref) => xapi.call(anyRecord, "VBD.get_record", ref)));
  vbds.sort((a, b) => Number(a.userdevice) - Number(b.userdevice));
  const drives = await Promise.all(vbds.map(async (vbd) => (vbd.type === "CD" ? "CD" : `Disk ${await xapi.call(z.coerce.string(), "VDI.get_virtual_size", vbd.VDI)}`)));
  const macs = await Promise.all((record.VIFs as string[]).map((ref) => xapi.call(z.string(), "VIF.get_MAC", ref)));
  return { name: record.name_label, description: record.name_description, memory: record.memory_static_max, vcpus: record.VCPUs_max, firmware: record.HVM_boot_params.firmware, os: record.other_config["ovf-os-type"], drives, macs };
}

test("a VM as an OVA: GNU tar, qemu-img and sha256sum read it; imported back it is the same VM; resumed to the same bytes", async () => {
  const disk1 = sampleDisk();
  const disk2 = Buffer.alloc(5 * MiB + 512);
  disk2.fill(0x77, 3 * MiB, 3 * MiB + 70_000);
  const vmdk1 = qemuImage(dir, disk1, "in1", "vmdk", ["-o", "subformat=streamOptimized"]);
  const qcow2 = qemuImage(dir, disk2, "in2", "qcow2");
  const ovf = Buffer.from(
    writeOvf({
      name: "exported/vm ünïcode",
      description: "round trip",
      memory: 1536 * MiB,
      vcpus: 3,
      firmware: "uefi",
      secureBoot: false,
      os: { id: 96, type: "debian10_64Guest", description: "Debian" },
      drives: [{ kind: "disk", href: "a.vmdk", capacity: disk1.length, name: "system" }, { kind: "cd", name: "cd" }, { kind: "disk", href: "b.qcow2", capacity: disk2.length, name: "data" }],
      nics: [{ network: "VM Network", mac: "00:16:3e:11:22:33" }],
    }),
  );
  const files: Array<[string, Buffer]> = [["vm.ovf", ovf], ["a.vmdk", vmdk1], ["b.qcow2", qcow2]];
  const original = await importOva(target("export-original"), bufferSource("vm.ova", await tarOf([...files, ["vm.mf", manifestOf(files)]])));
  const uuid = await xapi.call(z.string(), "VM.get_uuid", original.vm);

  const url = `${host.client.url}/export?session_id=${host.client.session}&uuid=${uuid}&format=ova`;
  const head = await http(url, { method: "HEAD" });
  assert.equal(head.status, 200);
  assert.equal(head.headers["content-disposition"], 'attachment; filename="exported_vm_n_code.ova"');
  const answer = await http(url);
  assert.equal(answer.status, 200);
  const etag = String(answer.headers.etag);
  assert.match(etag, /^"ho1-\d+-[0-9a-f]{20}"$/);
  const ova = answer.body;
  const file = join(dir, "out.ova");
  writeFileSync(file, ova);

  const members = execFileSync("tar", ["-tvf", file]).toString().trim().split("\n").map((line) => line.split(/\s+/).at(-1));
  assert.deepEqual(members, ["exported_vm_n_code.ovf", "exported_vm_n_code-disk1.vmdk", "exported_vm_n_code-disk2.vmdk", "exported_vm_n_code.mf"]);
  const out = join(dir, "unpacked");
  execFileSync("mkdir", ["-p", out]);
  execFileSync("tar", ["-xf", file, "-C", out]);
  const manifest = readFileSync(join(out, "exported_vm_n_code.mf"), "utf8");
  assert.match(manifest, /^SHA256\(exported_vm_n_code\.ovf\)= [0-9a-f]{64}\n/);
  const sums = manifest.replace(/^SHA256\((.+)\)= ([0-9a-f]{64})$/gm, "$2  $1");
  assert.match(execFileSync("sha256sum", ["-c", "-"], { cwd: out, input: sums }).toString(), /disk2\.vmdk: OK/);
  const vbds = await Promise.all(((await xapi.call(anyRecord, "VM.get_record", original.vm)).VBDs as string[]).map((ref) => xapi.call(anyRecord, "VBD.get_record", ref)));
  const byDevice = new Map(vbds.map((vbd) => [vbd.userdevice, vbd.VDI]));
  for (const [member, device, size] of [["disk1", "0", disk1.length], ["disk2", "2", disk2.length]] as const) {
    const raw = join(dir, `${member}.raw`);
    writeFileSync(raw, await readVdi(host.service.ts, byDevice.get(device), { size } as never));
    const info = JSON.parse(execFileSync("qemu-img", ["info", "--output=json", join(out, `exported_vm_n_code-${member}.vmdk`)]).toString());
    assert.equal(info["format-specific"].data["create-type"], "streamOptimized");
    assert.match(execFileSync("qemu-img", ["compare", "-f", "vmdk", "-F", "raw", join(out, `exported_vm_n_code-${member}.vmdk`), raw]).toString(), /Images are identical/);
  }

  const back = await importOva(target("export-back"), bufferSource("out.ova", ova, { rereadable: false }));
  assert.deepEqual(back.notes, []);
  assert.deepEqual(await facts(back.vm!), await facts(original.vm!));

  const offset = Math.floor(ova.length * 0.7);
  const resumed = await http(`${url}&offset=${offset}&etag=${encodeURIComponent(etag)}`);
  assert.equal(resumed.status, 200);
  assert.ok(resumed.body.equals(ova.subarray(offset)), "the resumed export's bytes are the rest of the first");
  const stale = await http(`${url}&offset=${offset}&etag=${encodeURIComponent(etag.replace(/-[0-9a-f]{20}"$/, '-00000000000000000000"'))}`);
  assert.equal(stale.status, 412);
});
