// The vms router against a real toolstack: VMs made with XenAPI (VM.create, VDI.create, VBD.create,
// VIF.create), listed with their disks and SRs (listing only the SRs that hold them), renamed, described and
// destroyed with or without disks.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { startConsoleUnderTest } from "../testing.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const zRef = z.string();

async function makeVm(xapi: XenApiClient, sr: string, name: string) {
  const vm = await xapi.call(zRef, "VM.create", { name_label: name, memory_static_max: 2 * GiB, memory_dynamic_max: 2 * GiB, VCPUs_max: 2, VCPUs_at_startup: 2 });
  const root = await xapi.call(zRef, "VDI.create", { SR: sr, virtual_size: 8 * MiB, name_label: `${name} root`, type: "user" });
  const data = await xapi.call(zRef, "VDI.create", { SR: sr, virtual_size: 4 * MiB, name_label: `${name} data`, type: "user" });
  await xapi.call(zRef, "VBD.create", { VM: vm, VDI: root, userdevice: "0", type: "Disk", mode: "RW", bootable: true });
  await xapi.call(zRef, "VBD.create", { VM: vm, VDI: data, userdevice: "1", type: "Disk", mode: "RW", bootable: false });
  await xapi.call(zRef, "VBD.create", { VM: vm, VDI: "OpaqueRef:NULL", userdevice: "3", type: "CD", mode: "RO", empty: true, bootable: false });
  return { vm, root, data };
}

const isCode = (code: string) => (error: unknown) => {
  assert.ok(error instanceof TRPCError, String(error));
  assert.equal(error.code, code);
  return true;
};

test("vms: list with disks and SRs, get with interfaces, rename, description, destroy with and without disks", async (t) => {
  const { caller, anonymous, xapi } = await startConsoleUnderTest(t);
  const pool = (await xapi.call(z.array(zRef), "pool.get_all"))[0]!;
  const sr = await xapi.call(zRef, "pool.get_default_SR", pool);
  const srName = await xapi.call(z.string(), "SR.get_name_label", sr);
  const srUuid = await xapi.call(z.string(), "SR.get_uuid", sr);
  const network = (await xapi.call(z.array(zRef), "network.get_all"))[0]!;

  assert.deepEqual(await caller.vms.list(), { vms: [] });
  await assert.rejects(anonymous.vms.list(), isCode("UNAUTHORIZED"));

  const web = await makeVm(xapi, sr, "web 10");
  const db = await makeVm(xapi, sr, "web 9");
  await xapi.call(zRef, "VIF.create", { VM: web.vm, network, device: "0", MAC: "aa:bb:cc:dd:ee:01", MTU: 1500 });
  const template = await xapi.call(zRef, "VM.create", { name_label: "a template", is_a_template: true });

  const { vms } = await caller.vms.list();
  assert.deepEqual(
    vms.map((vm) => vm.name),
    ["web 9", "web 10"],
    "names sorted as people sort them; templates left out",
  );
  assert.ok(!vms.some((vm) => vm.ref === template));
  const listed = vms.find((vm) => vm.ref === web.vm)!;
  assert.equal(listed.memoryBytes, 2 * GiB);
  assert.equal(listed.vcpus, 2);
  assert.equal(listed.powerState, "Halted");
  assert.deepEqual(
    listed.disks.map((d) => [d.userdevice, d.isCd, d.empty, d.vdiRef]),
    [
      ["0", false, false, web.root],
      ["1", false, false, web.data],
      ["3", true, true, null],
    ],
  );
  const { volumes } = await caller.vms.volumes();
  assert.deepEqual(Object.keys(volumes).sort(), [web.root, web.data, db.root, db.data].sort(), "the listed VMs' volumes, the template's none");
  assert.deepEqual(
    [web.root, web.data].map((ref) => [volumes[ref]!.name, volumes[ref]!.sizeBytes, volumes[ref]!.srRef, volumes[ref]!.srName, volumes[ref]!.srUuid]),
    [
      ["web 10 root", 8 * MiB, sr, srName, srUuid],
      ["web 10 data", 4 * MiB, sr, srName, srUuid],
    ],
  );
  await assert.rejects(anonymous.vms.volumes(), isCode("UNAUTHORIZED"));

  const page = await caller.vms.get({ ref: web.vm });
  assert.equal(page.name, "web 10");
  assert.deepEqual(
    page.interfaces.map((i) => [i.device, i.mac, i.mtu, i.networkRef, typeof i.networkName]),
    [["0", "aa:bb:cc:dd:ee:01", 1500, network, "string"]],
  );
  assert.ok(page.allowedOperations.includes("destroy"));
  assert.deepEqual(
    page.disks.map((d) => [d.userdevice, d.vdi?.name ?? null, d.vdi?.srUuid ?? null]),
    [
      ["0", "web 10 root", srUuid],
      ["1", "web 10 data", srUuid],
      ["3", null, null],
    ],
  );

  await caller.vms.rename({ ref: web.vm, name: "  web renamed  " });
  await caller.vms.setDescription({ ref: web.vm, description: "front end" });
  const renamed = await caller.vms.get({ ref: web.vm });
  assert.deepEqual([renamed.name, renamed.description], ["web renamed", "front end"]);
  const tasks = await xapi.call(z.record(z.string(), z.looseObject({ name_label: z.string() })), "task.get_all_records");
  assert.ok(Object.values(tasks).some((task) => task.name_label === "Async.VM.set_name_label"), "the rename ran as a task");
  await assert.rejects(caller.vms.rename({ ref: web.vm, name: "   " }), isCode("BAD_REQUEST"));

  // Destroy keeping the disks: the VDIs stay, unplugged.
  await caller.vms.destroy({ ref: db.vm, keepDisks: true });
  assert.deepEqual(await xapi.call(z.array(zRef), "VDI.get_VBDs", db.root), []);
  // Destroy with the disks: they go.
  await caller.vms.destroy({ ref: web.vm, keepDisks: false });
  await assert.rejects(xapi.call(z.unknown(), "VDI.get_record", web.root), /HANDLE_INVALID/);
  assert.deepEqual(await caller.vms.list(), { vms: [] });

  // A VM gone (another window): NOT_FOUND in words, for the page and for a change.
  await assert.rejects(caller.vms.get({ ref: web.vm }), (error: unknown) => {
    isCode("NOT_FOUND")(error);
    assert.match((error as Error).message, /no longer exists/);
    return true;
  });
  await assert.rejects(caller.vms.destroy({ ref: web.vm, keepDisks: true }), isCode("NOT_FOUND"));
  await assert.rejects(caller.vms.get({ ref: template }), isCode("NOT_FOUND"));
});

test("vms: the list reads no volumes; the disks' volumes are read from the SRs that hold them only, not from every SR", async (t) => {
  const { caller, xapi } = await startConsoleUnderTest(t);
  const pool = (await xapi.call(z.array(zRef), "pool.get_all"))[0]!;
  const sr = await xapi.call(zRef, "pool.get_default_SR", pool);
  const [host] = await xapi.call(z.array(zRef), "host.get_all");
  const scratch = await mkdtemp(join(tmpdir(), "hangar-vms-"));
  t.after(() => rm(scratch, { recursive: true, force: true }));
  const other = await xapi.call(zRef, "SR.create", host, { path: join(scratch, "other") }, 0, "no VM disks here", "", "file", "user", false, {});
  const volume = await xapi.call(zRef, "VDI.create", { SR: other, virtual_size: MiB, name_label: "nobody's" });
  const web = await makeVm(xapi, sr, "web");

  const trace = join(scratch, "plugins.log");
  const listings = async () => (await readFile(trace, "utf8").catch(() => "")).split("\n").filter((line) => / SR\.ls /.test(line)).length;
  process.env.HANGAR_PLUGIN_TRACE = trace;
  let listed, volumes;
  try {
    listed = await caller.vms.list();
    assert.equal(await listings(), 0, "the VMs and their drives without a volume listing");
    ({ volumes } = await caller.vms.volumes());
  } finally {
    delete process.env.HANGAR_PLUGIN_TRACE;
  }
  assert.deepEqual(listed.vms[0]!.disks.map((disk) => disk.vdiRef), [web.root, web.data, null]);
  assert.deepEqual(Object.keys(volumes).sort(), [web.root, web.data].sort());
  assert.equal(await listings(), 1, "the default SR's listing only");

  await caller.vms.destroy({ ref: web.vm, keepDisks: false });
  await xapi.call(z.unknown(), "VDI.destroy", volume);
  await xapi.call(z.unknown(), "SR.destroy", other);
});
