// OVAs, OVFs with their files and bare disk images imported through XenAPI and /import_raw_vdi of a real
// toolstack (a file SR), their disks written by Debian's qemu-img: VMware's member order and manifest,
// VirtualBox's (manifest last, SHA-1, spaced), qemu's qcow2 and raw; and the bad packages the issue lists,
// each refused naming the file and the problem with nothing left behind.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { z } from "zod";
import { sampleDisk } from "../disk/testing.ts";
import { startTestToolstack, type TestToolstack } from "../toolstack/storage-testing.ts";
import { readVdi } from "../toolstack/transfer/testing.ts";
import { XenApiClient } from "../xenapi/client.ts";
import { writeOvf } from "./descriptor-writer.ts";
import { sniffPackage } from "../../lib/file-kind.ts";
import { importDiskImage, importOva, importOvfFiles, type ImportTarget, PackageError, type PackageSource, PART_OF_KEY } from "./import.ts";
import { runInTask } from "./in-task.ts";
import { bufferSource, manifestOf, qemuImage, tarOf, virtualBoxOvf } from "./testing.ts";

const MiB = 1024 * 1024;
let host: TestToolstack;
let xapi: XenApiClient;
let dir: string;
let sr: string;
let disk1: Buffer;
let disk2: Buffer;

before(async () => {
  host = await startTestToolstack();
  xapi = new XenApiClient(host.client.url, host.client.session);
  dir = mkdtempSync(join(tmpdir(), "hangar-ova-import-"));
  sr = await host.client.call<string>("pool.get_default_SR", (await host.client.call<string[]>("pool.get_all"))[0]);
  disk1 = sampleDisk();
  disk2 = Buffer.alloc(3 * MiB);
  disk2.fill(0x5a, MiB, 2 * MiB + 4096);
});
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});

const anyRecord = z.record(z.string(), z.any());
let marks = 0;
function target(options: Partial<ImportTarget> = {}): ImportTarget {
  return { xapi, toolstack: host.client.url, sr, mark: `test-${++marks}`, force: false, signal: AbortSignal.timeout(120_000), ...options };
}

async function counts(): Promise<{ vms: number; vdis: number }> {
  return { vms: (await xapi.call(z.array(z.string()), "VM.get_all")).length, vdis: (await xapi.call(z.array(z.string()), "VDI.get_all")).length };
}

/** The VM's VBDs in device order: [type, VDI bytes or null, bootable]. */
async function drives(vm: string): Promise<Array<{ type: string; userdevice: string; bootable: boolean; vdi: string }>> {
  const record = await xapi.call(anyRecord, "VM.get_record", vm);
  const vbds = await Promise.all((record.VBDs as string[]).map((vbd) => xapi.call(anyRecord, "VBD.get_record", vbd)));
  return vbds.map((v) => ({ type: v.type, userdevice: v.userdevice, bootable: v.bootable, vdi: v.VDI })).sort((a, b) => Number(a.userdevice) - Number(b.userdevice));
}

const GiB = 1024 ** 3;
function hangarOvf(name: string, disks: Array<{ href: string; capacity: number }>): Buffer {
  return Buffer.from(
    writeOvf({
      name,
      description: "from a test",
      memory: 2 * GiB,
      vcpus: 2,
      firmware: "uefi",
      secureBoot: false,
      os: { id: 101, type: "otherLinux64Guest", description: "Linux 64-bit" },
      drives: [{ kind: "disk", href: disks[0]!.href, capacity: disks[0]!.capacity, name: "Hard Disk 1" }, { kind: "cd", name: "CD 1" }, ...disks.slice(1).map((d, i) => ({ kind: "disk" as const, href: d.href, capacity: d.capacity, name: `Hard Disk ${i + 2}` }))],
      nics: [{ network: "VM Network", mac: "00:50:56:aa:bb:cc" }],
    }),
  );
}

/** A VMware-ordered OVA (ovf, mf, disks) of two streamOptimized VMDKs. */
async function vmwareOva(options: { badDigest?: boolean } = {}): Promise<Buffer> {
  const vmdk1 = qemuImage(dir, disk1, "d1", "vmdk", ["-o", "subformat=streamOptimized"]);
  const vmdk2 = qemuImage(dir, disk2, "d2", "vmdk", ["-o", "subformat=streamOptimized"]);
  const ovf = hangarOvf("vmware vm", [{ href: "vm-disk1.vmdk", capacity: disk1.length }, { href: "vm-disk2.vmdk", capacity: disk2.length }]);
  const files: Array<[string, Buffer]> = [["vm.ovf", ovf], ["vm-disk1.vmdk", vmdk1], ["vm-disk2.vmdk", vmdk2]];
  const manifest = manifestOf(files);
  if (options.badDigest === true) {
    const at = manifest.indexOf("vm-disk2.vmdk)= ") + 16;
    manifest[at] = manifest[at] === 0x30 ? 0x31 : 0x30;
  }
  return tarOf([files[0]!, ["vm.mf", manifest], ...files.slice(1)]);
}

describe("importOva", () => {
  test("a VMware-style OVA (ovf, mf, streamOptimized VMDKs) becomes the VM it describes, in a task with its result", async () => {
    const ova = await vmwareOva();
    assert.deepEqual(sniffPackage(ova.subarray(0, 512)), { kind: "ova" });
    const task = await xapi.call(z.string(), "task.create", "VM import: vm.ova", "test");
    const result = await runInTask(xapi, task, ova.length, AbortSignal.timeout(120_000), (control) => importOva(target({ signal: control.signal, task, progress: control.progress }), bufferSource("vm.ova", ova)));
    const record = await xapi.call(anyRecord, "VM.get_record", result.vm);
    assert.equal(record.name_label, "vmware vm");
    assert.equal(record.name_description, "from a test");
    assert.equal(Number(record.memory_static_max), 2 * GiB);
    assert.equal(Number(record.VCPUs_max), 2);
    assert.equal(record.HVM_boot_params.firmware, "uefi");
    assert.deepEqual(record.other_config, { "ovf-os-id": "101", "ovf-os-type": "otherLinux64Guest", "ovf-os-description": "Linux 64-bit", "ovf-virtual-system-type": "vmx-13" });
    const vbds = await drives(result.vm!);
    assert.deepEqual(vbds.map((v) => [v.userdevice, v.type, v.bootable]), [["0", "Disk", true], ["1", "CD", false], ["2", "Disk", false]]);
    assert.deepEqual(await readVdi(host.service.ts, vbds[0]!.vdi, { size: disk1.length } as never), disk1);
    assert.deepEqual(await readVdi(host.service.ts, vbds[2]!.vdi, { size: disk2.length } as never), disk2);
    const vifs = record.VIFs as string[];
    assert.equal(vifs.length, 1);
    const vif = await xapi.call(anyRecord, "VIF.get_record", vifs[0]);
    assert.equal(vif.MAC, "00:50:56:aa:bb:cc");
    assert.equal((await xapi.call(anyRecord, "network.get_record", vif.network)).bridge, "xenbr0");
    const taskRecord = await xapi.call(anyRecord, "task.get_record", task);
    assert.equal(taskRecord.status, "success");
    assert.match(taskRecord.result, new RegExp(result.vm!));
    assert.equal(taskRecord.progress, 1);
    // The disks' own transfers ran in tasks of their own, gone once done.
    assert.deepEqual(Object.values(await xapi.records("task", anyRecord)).filter((t) => t.other_config?.[PART_OF_KEY] === task), []);
    for (const vdi of result.vdis) assert.deepEqual((await xapi.call(anyRecord, "VDI.get_record", vdi)).other_config, {});
  });

  test("VirtualBox's OVA (manifest last, SHA-1, spaced) is checked, and what the VM cannot have is listed", async () => {
    const vmdk = qemuImage(dir, disk1, "vb", "vmdk", ["-o", "subformat=streamOptimized"]);
    const ovf = Buffer.from(virtualBoxOvf({ disk: "debian-disk001.vmdk", capacity: disk1.length }));
    const files: Array<[string, Buffer]> = [["debian.ovf", ovf], ["debian-disk001.vmdk", vmdk]];
    const ova = await tarOf([...files, ["debian.mf", manifestOf(files, "virtualbox")]]);
    const result = await importOva(target(), bufferSource("debian.ova", ova, { rereadable: false }));
    assert.deepEqual(result.notes, ["USB controller: usb", "sound card: sound (ensoniq1371)"]);
    const record = await xapi.call(anyRecord, "VM.get_record", result.vm);
    assert.equal(record.name_label, "debian & friends");
    assert.equal(record.HVM_boot_params.firmware, "uefi");
    const vbds = await drives(result.vm!);
    assert.deepEqual(vbds.map((v) => v.type), ["Disk", "CD"]);
    assert.deepEqual(await readVdi(host.service.ts, vbds[0]!.vdi, { size: disk1.length } as never), disk1);
  });

  test("qemu-made disks inside (qcow2, raw), and a descriptor that comes after its disks (read again from the source)", async () => {
    const qcow2 = qemuImage(dir, disk1, "q", "qcow2");
    const ovf = hangarOvf("qemu vm", [{ href: "a.qcow2", capacity: disk1.length }, { href: "b.img", capacity: disk2.length }]);
    const ova = await tarOf([["a.qcow2", qcow2], ["b.img", disk2], ["vm.ovf", ovf]]);
    const result = await importOva(target(), bufferSource("qemu.ova", ova));
    const vbds = await drives(result.vm!);
    assert.deepEqual(await readVdi(host.service.ts, vbds[0]!.vdi, { size: disk1.length } as never), disk1);
    assert.deepEqual(await readVdi(host.service.ts, vbds[2]!.vdi, { size: disk2.length } as never), disk2);
    assert.ok(result.notes.some((note) => /a\.qcow2 is a qcow2 image, though its descriptor says vmdk/.test(note)), result.notes.join("\n"));
  });

  test("an OVF and its disk files given one by one", async () => {
    const vmdk = qemuImage(dir, disk2, "f", "vmdk", ["-o", "subformat=streamOptimized"]);
    const ovf = hangarOvf("files vm", [{ href: "f.vmdk", capacity: disk2.length }]);
    const result = await importOvfFiles(target(), bufferSource("files.ovf", ovf), new Map<string, PackageSource>([["f.vmdk", bufferSource("f.vmdk", vmdk)]]));
    const vbds = await drives(result.vm!);
    assert.deepEqual(await readVdi(host.service.ts, vbds[0]!.vdi, { size: disk2.length } as never), disk2);
  });

  test("a wrong digest fails the import with nothing left, unless checksum errors are ignored", async () => {
    const ova = await vmwareOva({ badDigest: true });
    const before = await counts();
    await assert.rejects(importOva(target(), bufferSource("bad.ova", ova)), (error: Error) => error instanceof PackageError && /vm-disk2\.vmdk: its SHA256 digest is [0-9a-f]{64}, the manifest says/.test(error.message) && /nothing was imported/.test(error.message));
    assert.deepEqual(await counts(), before);
    const forced = await importOva(target({ force: true }), bufferSource("bad.ova", ova));
    assert.ok(forced.notes.some((note) => note.startsWith("checksum errors ignored: vm-disk2.vmdk")));
  });

  describe("refuses, naming the file and the problem, with nothing left", () => {
    const ovfOf = (href: string, capacity: number) => hangarOvf("bad", [{ href, capacity }]);
    const cases: Array<[string, () => Promise<Buffer>, RegExp, { rereadable?: boolean }?]> = [
      ["a descriptor that is not XML", () => tarOf([["vm.ovf", Buffer.from("{not xml")]]), /vm\.ovf: not a readable XML document/],
      ["a descriptor with a DOCTYPE", () => tarOf([["vm.ovf", Buffer.from('<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><Envelope/>')]]), /vm\.ovf: .*DOCTYPE/],
      ["a file the OVA lacks", async () => tarOf([["vm.ovf", ovfOf("gone.vmdk", disk1.length)]]), /names gone\.vmdk, which the package lacks/],
      ["a disk larger than the OVF says", async () => tarOf([["vm.ovf", ovfOf("d.qcow2", MiB)], ["d.qcow2", qemuImage(dir, disk1, "big", "qcow2")]]), /d\.qcow2: .*virtual size, \d+ bytes, is more than the VDI's 1048576 bytes/],
      ["a member path with ..", async () => tarOf([["vm.ovf", ovfOf("d.img", MiB)], ["../d.img", Buffer.alloc(MiB)]]), /"\.\.\/d\.img": path with \.\./],
      ["an absolute member path", async () => tarOf([["/etc/d.img", Buffer.alloc(MiB)]]), /absolute path/],
      ["a 0-byte disk", async () => tarOf([["vm.ovf", ovfOf("d.img", MiB)], ["d.img", Buffer.alloc(0)]]), /d\.img is empty \(0 bytes\)/],
      ["a VMDK descriptor of flat extents", async () => tarOf([["vm.ovf", ovfOf("d.vmdk", MiB)], ["d.vmdk", Buffer.from('# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\ncreateType="monolithicFlat"\n\nRW 2048 FLAT "d-flat.vmdk" 0\n')]]), /d\.vmdk is a VMDK descriptor \(createType monolithicFlat, extents of type FLAT\)/],
      ["a descriptor after its disk, from a pipe", async () => tarOf([["d.img", Buffer.alloc(MiB)], ["vm.ovf", ovfOf("d.img", MiB)]]), /d\.img comes before the descriptor vm\.ovf, and this source cannot be read twice/, { rereadable: false }],
      ["a package without a descriptor", async () => tarOf([["d.img", Buffer.alloc(MiB)]]), /no OVF descriptor/],
      ["a truncated OVA", async () => {
        const ova = await vmwareOva();
        return ova.subarray(0, Math.floor(ova.length * 0.6));
      }, /truncated/],
    ];
    for (const [what, make, reason, options] of cases) {
      test(what, async () => {
        const ova = await make();
        const before = await counts();
        await assert.rejects(importOva(target(), bufferSource("bad.ova", ova, options)), (error: Error) => {
          assert.match(error.message, reason);
          return true;
        });
        assert.deepEqual(await counts(), before);
      });
    }
  });

  test("a cancel of its task stops the import and removes what it made", async () => {
    const ova = await vmwareOva();
    const before = await counts();
    const task = await xapi.call(z.string(), "task.create", "VM import: slow.ova", "test");
    // A source that stops after the first disk begins: the import waits for bytes as an upload would.
    const stalled: PackageSource = { ...bufferSource("slow.ova", ova), open: (start) => bufferSource("slow.ova", ova.subarray(0, 600_000)).open(start) };
    const stalling: PackageSource = {
      ...stalled,
      open(start) {
        const stream = stalled.open(start);
        const ended = new Promise(() => undefined);
        return (async function* () {
          yield* stream;
          await ended;
        })() as never;
      },
    };
    const running = runInTask(xapi, task, ova.length, AbortSignal.timeout(60_000), (control) => importOva(target({ signal: control.signal, task }), stalling));
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await xapi.call(z.unknown(), "task.cancel", task);
    await assert.rejects(running, /cancelled/);
    assert.deepEqual(await counts(), before);
    assert.equal(await xapi.call(z.string(), "task.get_status", task), "cancelled");
  });
});

test("what an earlier attempt of the same import left (a console gone mid-import) is removed before it starts again", async () => {
  const { VmBuilder } = await import("./vm-builder.ts");
  const before = await counts();
  const left = new VmBuilder(xapi, "restarted-import");
  await left.createVm({ name: "half made", description: "", memory: 256 * MiB, vcpus: 1, firmware: "bios", secureBoot: false }, {});
  await left.attachDisk(await left.createVdi(sr, MiB, "half written", ""), 0, true);
  assert.deepEqual(await counts(), { vms: before.vms + 1, vdis: before.vdis + 1 });
  const qcow2 = qemuImage(dir, disk2, "again", "qcow2");
  const again = await importDiskImage(target({ mark: "restarted-import" }), bufferSource("again.qcow2", qcow2), { vm: true });
  assert.deepEqual(await counts(), { vms: before.vms + 1, vdis: before.vdis + 1 });
  assert.equal((await xapi.call(z.array(z.string()), "VM.get_by_name_label", "half made")).length, 0);
  assert.ok(again.vm !== null);
});

describe("importDiskImage", () => {
  test("a qcow2 becomes a VM that boots it, or a disk alone; a name that lies about the format is said", async () => {
    const qcow2 = qemuImage(dir, disk1, "cloud", "qcow2");
    const asVm = await importDiskImage(target(), bufferSource("debian-13-genericcloud.qcow2", qcow2), { vm: true });
    const record = await xapi.call(anyRecord, "VM.get_record", asVm.vm);
    assert.equal(record.name_label, "debian-13-genericcloud");
    const vbds = await drives(asVm.vm!);
    assert.deepEqual(vbds.map((v) => [v.type, v.bootable]), [["Disk", true], ["CD", false]]);
    assert.deepEqual(await readVdi(host.service.ts, vbds[0]!.vdi, { size: disk1.length } as never), disk1);
    assert.equal((record.VIFs as string[]).length, 1);

    const alone = await importDiskImage(target(), bufferSource("data.vmdk", qcow2), { vm: false });
    assert.equal(alone.vm, null);
    const vdi = await xapi.call(anyRecord, "VDI.get_record", alone.vdis[0]);
    assert.equal(vdi.name_label, "data");
    assert.deepEqual(vdi.other_config, {});
    assert.deepEqual(alone.notes, ["data.vmdk is a qcow2 image, though its name says vmdk: read as qcow2"]);
  });

  test("an empty file is refused", async () => {
    await assert.rejects(importDiskImage(target(), bufferSource("empty.raw", Buffer.alloc(0)), { vm: true }), /empty\.raw is empty/);
  });
});
