// VM.*: virtual machines as metadata, always Halted (nothing runs them here): full XenAPI records, which the
// XVA import and export read and write. VM.destroy removes the VM with its VBDs and VIFs and keeps its
// disks, as xapi's does; Hangar's VM.hangar_destroy(vm, keep_disks) also destroys the disks only it uses.
import { type FieldSpec, fieldSetter, mapFieldCalls, parseCreateRecord, zRecordArg } from "../accessors.ts";
import { objectErrors } from "../object-errors.ts";
import type { Toolstack } from "../toolstack.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { method } from "../methods.ts";
import { zBool, zFloat, zInt, zRef, zString, zStringList, zStringMap } from "../../xenapi/params.ts";
import { NULL_REF, type XenRecord, xenDate } from "../../xenapi/values.ts";
import { objectGetters } from "./getters.ts";
import { announceVdis } from "./vbd.ts";
import { destroyVdi } from "./vdi.ts";

const GiB = 1024 * 1024 * 1024;

/** What VM.create takes (xapi's writable fields), with the defaults a record made without them gets. */
export const VM_CREATE: FieldSpec = {
  name_label: [zString, ""],
  name_description: [zString, ""],
  user_version: [zInt, 1],
  is_a_template: [zBool, false],
  affinity: [zRef, NULL_REF],
  memory_target: [zInt, GiB],
  memory_static_max: [zInt, GiB],
  memory_dynamic_max: [zInt, GiB],
  memory_dynamic_min: [zInt, GiB],
  memory_static_min: [zInt, GiB],
  VCPUs_params: [zStringMap, {}],
  VCPUs_max: [zInt, 1],
  VCPUs_at_startup: [zInt, 1],
  actions_after_softreboot: [zString, "soft_reboot"],
  actions_after_shutdown: [zString, "destroy"],
  actions_after_reboot: [zString, "restart"],
  actions_after_crash: [zString, "restart"],
  PV_bootloader: [zString, ""],
  PV_kernel: [zString, ""],
  PV_ramdisk: [zString, ""],
  PV_args: [zString, ""],
  PV_bootloader_args: [zString, ""],
  PV_legacy_args: [zString, ""],
  HVM_boot_policy: [zString, "BIOS order"],
  HVM_boot_params: [zStringMap, { order: "cd" }],
  HVM_shadow_multiplier: [zFloat, 1],
  platform: [zStringMap, {}],
  PCI_bus: [zString, ""],
  other_config: [zStringMap, {}],
  recommendations: [zString, ""],
  xenstore_data: [zStringMap, {}],
  ha_always_run: [zBool, false],
  ha_restart_priority: [zString, ""],
  tags: [zStringList, []],
  blocked_operations: [zStringMap, {}],
  protection_policy: [zRef, NULL_REF],
  is_snapshot_from_vmpp: [zBool, false],
  snapshot_schedule: [zRef, NULL_REF],
  is_vmss_snapshot: [zBool, false],
  appliance: [zRef, NULL_REF],
  start_delay: [zInt, 0],
  shutdown_delay: [zInt, 0],
  order: [zInt, 0],
  suspend_SR: [zRef, NULL_REF],
  version: [zInt, 0],
  generation_id: [zString, ""],
  hardware_platform_version: [zInt, 0],
  has_vendor_device: [zBool, false],
  reference_label: [zString, ""],
  domain_type: [zString, "hvm"],
  NVRAM: [zStringMap, {}],
  bios_strings: [zStringMap, {}],
};

/** What a halted VM allows. */
export const HALTED_VM_OPERATIONS = ["destroy", "export", "changing_memory_limits", "changing_static_range", "changing_VCPUs", "metadata_export"] as const;

/** The fields the toolstack keeps itself: what a halted VM that never ran has. */
function systemFields(): XenRecord {
  return {
    allowed_operations: [...HALTED_VM_OPERATIONS],
    current_operations: {},
    power_state: "Halted",
    is_default_template: false,
    suspend_VDI: NULL_REF,
    resident_on: NULL_REF,
    scheduled_to_be_resident_on: NULL_REF,
    memory_overhead: 0,
    consoles: [],
    VIFs: [],
    VBDs: [],
    VUSBs: [],
    crash_dumps: [],
    VTPMs: [],
    domid: -1,
    domarch: "",
    last_boot_CPU_flags: {},
    is_control_domain: false,
    metrics: NULL_REF,
    guest_metrics: NULL_REF,
    last_booted_record: "",
    is_a_snapshot: false,
    snapshot_of: NULL_REF,
    snapshots: [],
    snapshot_time: xenDate(new Date(0)),
    transportable_snapshot_id: "",
    blobs: {},
    snapshot_info: {},
    snapshot_metadata: "",
    parent: NULL_REF,
    children: [],
    VGPUs: [],
    attached_PCIs: [],
    requires_reboot: false,
    pending_guidances: [],
  };
}

const VM_FIELDS = ["uuid", ...Object.keys(VM_CREATE), ...Object.keys(systemFields())];

/** static_min ≤ dynamic_min ≤ dynamic_max ≤ static_max, as xapi requires of every change. */
function checkMemory(record: XenRecord): void {
  const [staticMin, dynamicMin, dynamicMax, staticMax] = ["memory_static_min", "memory_dynamic_min", "memory_dynamic_max", "memory_static_max"].map((f) => Number(record[f]));
  if (!(staticMin! <= dynamicMin! && dynamicMin! <= dynamicMax! && dynamicMax! <= staticMax!)) {
    throw objectErrors.memoryConstraintViolation("Memory limits must satisfy: static_min <= dynamic_min <= dynamic_max <= static_max");
  }
}

/** 0 < VCPUs_at_startup ≤ VCPUs_max. */
function checkVcpus(record: XenRecord): void {
  const max = Number(record.VCPUs_max);
  const atStartup = Number(record.VCPUs_at_startup);
  if (!(max >= 1)) throw xenErrors.invalidValue("VCPUs_max", String(max));
  if (!(atStartup >= 1 && atStartup <= max)) throw xenErrors.invalidValue("VCPUs_at_startup", `${atStartup} (must be 1 to VCPUs_max = ${max})`);
}

/** A new halted VM from VM.create's record argument; `uuid` is for imports that keep a VM's identity. */
export async function createVm(ts: Toolstack, args: Record<string, unknown>, options: { uuid?: string } = {}): Promise<string> {
  const record: XenRecord = { uuid: options.uuid ?? crypto.randomUUID(), ...systemFields(), ...parseCreateRecord(VM_CREATE, args) };
  checkMemory(record);
  checkVcpus(record);
  return (await ts.objects.create("VM", record)).ref;
}

/** A memory or VCPU change, checked against the whole record as it would be. */
async function changeLimits(ts: Toolstack, ref: string, fields: XenRecord, check: (record: XenRecord) => void): Promise<void> {
  await ts.objects.update("VM", ref, (record) => {
    const changed = { ...record, ...fields };
    check(changed);
    return changed;
  });
}

const MEMORY_FIELDS = ["memory_static_max", "memory_dynamic_max", "memory_dynamic_min", "memory_static_min"] as const;

/** Removes a VM with its VBDs and VIFs in one transaction; answers the VDIs of its disks (not CDs). */
export async function destroyVm(ts: Toolstack, ref: string): Promise<string[]> {
  const vdis = await ts.db.transaction(async (tx) => {
    const vm = await ts.objects.get("VM", ref, tx);
    const used: Array<{ vdi: string; vbd: string; disk: boolean }> = [];
    for (const vbd of vm.record.VBDs as string[]) {
      const found = await ts.objects.find("VBD", vbd, tx);
      if (found === undefined) continue;
      used.push({ vdi: String(found.record.VDI), vbd, disk: found.record.type === "Disk" });
      await ts.objects.destroy("VBD", vbd, tx);
    }
    for (const vif of vm.record.VIFs as string[]) {
      const found = await ts.objects.find("VIF", vif, tx);
      if (found === undefined) continue;
      await ts.objects.destroy("VIF", vif, tx);
      const network = await ts.objects.find("network", String(found.record.network), tx);
      if (network !== undefined) await ts.objects.update("network", network.ref, (r) => ({ ...r, VIFs: (r.VIFs as string[]).filter((v) => v !== vif) }), tx);
    }
    await ts.objects.destroy("VM", ref, tx);
    return used.filter((u) => u.vdi !== NULL_REF);
  });
  await announceVdis(ts, vdis.map((u) => ({ vdi: u.vdi, vbd: u.vbd, change: "remove" as const })));
  return vdis.filter((u) => u.disk).map((u) => u.vdi);
}

export const vmCalls = [
  ...objectGetters("VM", VM_FIELDS),
  method("VM.create", [["args", zRecordArg]], ({ ts }, args) => createVm(ts, args)),
  method("VM.destroy", [["self", zRef]], async ({ ts }, ref) => {
    await destroyVm(ts, ref);
  }),
  method("VM.hangar_destroy", [["self", zRef], ["keep_disks", zBool]], async ({ ts }, ref, keepDisks) => {
    const disks = await destroyVm(ts, ref);
    if (keepDisks) return;
    // Disks another VM still uses stay; the others go through VDI.destroy's checks.
    const used = new Set((await ts.objects.all("VBD")).map((vbd) => String(vbd.record.VDI)));
    for (const vdi of new Set(disks.filter((d) => !used.has(d)))) await destroyVdi(ts, vdi);
    // VM.destroy and VDI.destroy in one: what each of them needs.
  }, { role: "vm-admin" }),
  fieldSetter("VM", "name_label", zString),
  fieldSetter("VM", "name_description", zString),
  fieldSetter("VM", "is_a_template", zBool),
  ...MEMORY_FIELDS.map((field) =>
    method(`VM.set_${field}`, [["self", zRef], ["value", zInt]], async ({ ts }, ref, value) => {
      await changeLimits(ts, ref, { [field]: value }, checkMemory);
    }),
  ),
  method(
    "VM.set_memory_limits",
    [["self", zRef], ["static_min", zInt], ["static_max", zInt], ["dynamic_min", zInt], ["dynamic_max", zInt]],
    async ({ ts }, ref, staticMin, staticMax, dynamicMin, dynamicMax) => {
      const fields = { memory_static_min: staticMin, memory_static_max: staticMax, memory_dynamic_min: dynamicMin, memory_dynamic_max: dynamicMax };
      await changeLimits(ts, ref, fields, checkMemory);
    },
  ),
  // xapi's VM.set_memory: every limit but static_min becomes the value.
  method("VM.set_memory", [["self", zRef], ["value", zInt]], async ({ ts }, ref, value) => {
    const fields = { memory_static_max: value, memory_dynamic_max: value, memory_dynamic_min: value, memory_target: value };
    await changeLimits(ts, ref, fields, checkMemory);
  }),
  method("VM.set_VCPUs_max", [["self", zRef], ["value", zInt]], async ({ ts }, ref, value) => {
    await changeLimits(ts, ref, { VCPUs_max: value }, checkVcpus);
  }),
  method("VM.set_VCPUs_at_startup", [["self", zRef], ["value", zInt]], async ({ ts }, ref, value) => {
    await changeLimits(ts, ref, { VCPUs_at_startup: value }, checkVcpus);
  }),
  ...mapFieldCalls("VM", "other_config"),
  ...mapFieldCalls("VM", "platform"),
];
