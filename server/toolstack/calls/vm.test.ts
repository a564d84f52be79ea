// VM, VBD, VIF and network calls through real HTTP JSON-RPC: full XenAPI records with defaults, the checks
// xapi makes (memory limits, VCPUs, devices, MACs), links kept both ways with their events, and VM.destroy
// keeping disks where VM.hangar_destroy removes them.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { assertXenError, MiB, startTestToolstack, type TestToolstack, type XenApiClient } from "../storage-testing.ts";

type Rec = Record<string, unknown>;
const GiB = 1024 * MiB;
const NULL = "OpaqueRef:NULL";

describe("VM, VBD, VIF and network", () => {
  let host: TestToolstack;
  let client: XenApiClient;
  let sr: string;
  let network: string;

  const vmWithDisk = async (name: string) => {
    const vm = await client.call<string>("VM.create", { name_label: name });
    const vdi = await client.call<string>("VDI.create", { SR: sr, virtual_size: MiB, name_label: `${name} disk` });
    const vbd = await client.call<string>("VBD.create", { VM: vm, VDI: vdi, type: "Disk", mode: "RW", bootable: true });
    return { vm, vdi, vbd };
  };

  before(async () => {
    host = await startTestToolstack();
    client = host.client;
    sr = await client.call<string>("pool.get_default_SR", (await client.call<string[]>("pool.get_all"))[0]);
    network = (await client.call<string[]>("network.get_all"))[0]!;
  });
  after(() => host.stop());

  test("VM.create: a halted VM with xapi's defaults for every field not given; getters and the event", async () => {
    const token = (await client.call<{ token: string }>("event.from", ["vm"], "", 0)).token;
    const vm = await client.call<string>("VM.create", {
      name_label: "web",
      memory_static_max: String(2 * GiB), // as XML-RPC clients send int64s
      memory_dynamic_max: 2 * GiB,
      memory_dynamic_min: GiB,
      memory_static_min: GiB,
      VCPUs_max: 4,
      VCPUs_at_startup: 2,
      platform: { viridian: "true" },
      other_config: { note: " kept " },
      is_a_template: false,
      unknown_field: "ignored",
    });
    const record = await client.call<Rec>("VM.get_record", vm);
    assert.equal(record.power_state, "Halted");
    assert.equal(record.memory_static_max, 2 * GiB);
    assert.deepEqual([record.VCPUs_max, record.VCPUs_at_startup], [4, 2]);
    assert.deepEqual(record.platform, { viridian: "true" });
    assert.deepEqual(record.other_config, { note: " kept " });
    assert.deepEqual([record.VBDs, record.VIFs, record.resident_on, record.HVM_boot_policy, record.actions_after_crash], [[], [], NULL, "BIOS order", "restart"]);
    assert.ok(!("unknown_field" in record));
    for (const field of ["uuid", "user_version", "snapshots", "blocked_operations", "HVM_shadow_multiplier", "NVRAM", "domain_type", "bios_strings"]) assert.ok(field in record, field);
    assert.equal(await client.call("VM.get_by_uuid", record.uuid), vm);
    assert.deepEqual(await client.call("VM.get_by_name_label", "web"), [vm]);
    assert.equal(await client.call("VM.get_memory_static_max", vm), 2 * GiB);
    const events = (await client.call<{ events: Rec[] }>("event.from", ["vm"], token, 1)).events;
    assert.ok(events.some((e) => e.ref === vm && e.operation === "add" && e.class === "vm"));
    await assertXenError(client.call("VM.create", { name_label: 3 }), "FIELD_TYPE_ERROR", ["name_label"]);
  });

  test("memory limits and VCPUs are checked as xapi checks them", async () => {
    const vm = await client.call<string>("VM.create", { name_label: "limits" });
    await client.call("VM.set_memory_limits", vm, GiB / 2, 4 * GiB, GiB, 2 * GiB);
    assert.deepEqual(
      await Promise.all(["static_min", "dynamic_min", "dynamic_max", "static_max"].map((f) => client.call(`VM.get_memory_${f}`, vm))),
      [GiB / 2, GiB, 2 * GiB, 4 * GiB],
    );
    await client.call("VM.set_memory_static_max", vm, 8 * GiB);
    await client.call("VM.set_memory_dynamic_max", vm, 3 * GiB);
    await assertXenError(client.call("VM.set_memory_dynamic_max", vm, 9 * GiB), "MEMORY_CONSTRAINT_VIOLATION");
    await assertXenError(client.call("VM.set_memory_static_min", vm, 2 * GiB), "MEMORY_CONSTRAINT_VIOLATION");
    await assertXenError(client.call("VM.create", { memory_static_max: GiB, memory_dynamic_max: 2 * GiB }), "MEMORY_CONSTRAINT_VIOLATION");
    await client.call("VM.set_memory", vm, 3 * GiB);
    assert.deepEqual([await client.call("VM.get_memory_static_max", vm), await client.call("VM.get_memory_dynamic_min", vm)], [3 * GiB, 3 * GiB]);

    await client.call("VM.set_VCPUs_max", vm, 8);
    await client.call("VM.set_VCPUs_at_startup", vm, 8);
    await assertXenError(client.call("VM.set_VCPUs_max", vm, 4), "INVALID_VALUE");
    await assertXenError(client.call("VM.set_VCPUs_at_startup", vm, 0), "INVALID_VALUE");
    await client.call("VM.set_name_label", vm, "renamed");
    await client.call("VM.set_name_description", vm, "described");
    await client.call("VM.add_to_other_config", vm, "k", "v");
    assert.deepEqual(
      [await client.call("VM.get_name_label", vm), await client.call("VM.get_name_description", vm), await client.call("VM.get_other_config", vm)],
      ["renamed", "described", { k: "v" }],
    );
  });

  test("VBDs link VMs and VDIs both ways; devices are chosen or checked; empty CDs", async () => {
    const { vm, vdi, vbd } = await vmWithDisk("linked");
    const record = await client.call<Rec>("VBD.get_record", vbd);
    assert.deepEqual([record.VM, record.VDI, record.userdevice, record.type, record.mode, record.bootable, record.currently_attached], [vm, vdi, "0", "Disk", "RW", true, false]);
    assert.deepEqual(await client.call("VM.get_VBDs", vm), [vbd]);
    assert.deepEqual(await client.call("VDI.get_VBDs", vdi), [vbd]);
    const cd = await client.call<string>("VBD.create", { VM: vm, VDI: NULL, type: "CD", mode: "RO", empty: true, userdevice: "3" });
    assert.equal(await client.call("VBD.get_userdevice", cd), "3");
    assert.equal(await client.call("VBD.get_userdevice", await client.call<string>("VBD.create", { VM: vm, type: "CD", mode: "RO", empty: true })), "1");
    await assertXenError(client.call("VBD.create", { VM: vm, VDI: vdi, userdevice: "3" }), "DEVICE_ALREADY_EXISTS", ["3"]);
    await assertXenError(client.call("VBD.create", { VM: vm, VDI: "OpaqueRef:nope" }), "HANDLE_INVALID", ["VDI", "OpaqueRef:nope"]);
    await assertXenError(client.call("VBD.create", { VM: "OpaqueRef:nope", VDI: vdi }), "HANDLE_INVALID", ["VM", "OpaqueRef:nope"]);
    await assertXenError(client.call("VBD.create", { VM: vm, VDI: NULL, type: "Disk" }), "INVALID_VALUE");
    await assertXenError(client.call("VBD.create", { VM: vm, VDI: vdi, mode: "rw" }), "VALUE_NOT_SUPPORTED");
    await client.call("VBD.set_mode", vbd, "RO");
    assert.equal(await client.call("VBD.get_mode", vbd), "RO");
    await client.call("VBD.destroy", vbd);
    assert.deepEqual(await client.call("VDI.get_VBDs", vdi), []);
    assert.ok(!(await client.call<string[]>("VM.get_VBDs", vm)).includes(vbd));
  });

  test("VIFs: a MAC given is kept, none given is generated; devices and MACs checked; networks list their VIFs", async () => {
    const vm = await client.call<string>("VM.create", { name_label: "net" });
    const kept = await client.call<string>("VIF.create", { VM: vm, network, device: "0", MAC: "AA:bb:CC:00:11:22", MTU: 9000 });
    assert.deepEqual(
      [await client.call("VIF.get_MAC", kept), await client.call("VIF.get_MAC_autogenerated", kept), await client.call("VIF.get_MTU", kept)],
      ["AA:bb:CC:00:11:22", false, 9000],
    );
    const generated = await client.call<string>("VIF.create", { VM: vm, network });
    const mac = await client.call<string>("VIF.get_MAC", generated);
    assert.match(mac, /^[0-9a-f][26ae](:[0-9a-f]{2}){5}$/, "a locally administered unicast MAC");
    assert.equal(await client.call("VIF.get_device", generated), "1");
    assert.equal(await client.call("VIF.get_MAC_autogenerated", generated), true);
    await assertXenError(client.call("VIF.create", { VM: vm, network, device: "0" }), "DEVICE_ALREADY_EXISTS");
    await assertXenError(client.call("VIF.create", { VM: vm, network, MAC: "not-a-mac" }), "MAC_INVALID", ["not-a-mac"]);
    await assertXenError(client.call("VIF.create", { VM: vm, network: "OpaqueRef:nope" }), "HANDLE_INVALID");
    assert.deepEqual((await client.call<string[]>("VM.get_VIFs", vm)).sort(), [kept, generated].sort());
    assert.ok((await client.call<string[]>("network.get_VIFs", network)).includes(kept));
    await client.call("VIF.destroy", generated);
    assert.deepEqual(await client.call("VM.get_VIFs", vm), [kept]);
  });

  test("networks: the default one, create with a bridge made up, NETWORK_CONTAINS_VIF", async () => {
    const record = await client.call<Rec>("network.get_record", network);
    assert.deepEqual([record.bridge, record.MTU, record.managed], ["xenbr0", 1500, true]);
    const made = await client.call<string>("network.create", { name_label: "private", MTU: 9000 });
    assert.match(await client.call<string>("network.get_bridge", made), /^xapi\d+$/);
    await client.call("network.set_name_description", made, "jumbo");
    const vm = await client.call<string>("VM.create", {});
    const vif = await client.call<string>("VIF.create", { VM: vm, network: made });
    await assertXenError(client.call("network.destroy", made), "NETWORK_CONTAINS_VIF", [vif]);
    await client.call("VIF.destroy", vif);
    await client.call("network.destroy", made);
    await assertXenError(client.call("network.get_record", made), "HANDLE_INVALID");
  });

  test("VM.destroy removes the VM, its VBDs and VIFs, and keeps its disks", async () => {
    const { vm, vdi, vbd } = await vmWithDisk("kept-disks");
    const vif = await client.call<string>("VIF.create", { VM: vm, network });
    await client.call("VM.destroy", vm);
    for (const [cls, ref] of [["VM", vm], ["VBD", vbd], ["VIF", vif]] as const) await assertXenError(client.call(`${cls}.get_record`, ref), "HANDLE_INVALID");
    assert.deepEqual(await client.call("VDI.get_VBDs", vdi), []);
    assert.ok(!(await client.call<string[]>("network.get_VIFs", network)).includes(vif));
  });

  test("VM.hangar_destroy(vm, false) destroys the disks only it uses; keep_disks=true keeps them", async () => {
    const { vm, vdi } = await vmWithDisk("gone");
    const shared = await client.call<string>("VDI.create", { SR: sr, virtual_size: MiB });
    await client.call("VBD.create", { VM: vm, VDI: shared, userdevice: "1" });
    const other = await client.call<string>("VM.create", { name_label: "other" });
    await client.call("VBD.create", { VM: other, VDI: shared });
    await client.call("VM.hangar_destroy", vm, false);
    await assertXenError(client.call("VDI.get_record", vdi), "HANDLE_INVALID");
    assert.equal((await client.call<string[]>("VDI.get_VBDs", shared)).length, 1, "a disk another VM uses stays");

    const kept = await vmWithDisk("keeps");
    await client.call("VM.hangar_destroy", kept.vm, true);
    assert.deepEqual(await client.call("VDI.get_VBDs", kept.vdi), []);
  });
});
