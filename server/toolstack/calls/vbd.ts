// VBD.*: links of VMs to VDIs (disks, CDs), as metadata: nothing is plugged, VMs are halted. A VBD's VDI
// lists it in its VBDs field, which keeps the VDI from being destroyed.
import { type FieldSpec, fieldSetter, mapFieldCalls, parseCreateRecord, zRecordArg } from "../accessors.ts";
import { objectErrors } from "../object-errors.ts";
import type { Toolstack } from "../toolstack.ts";
import { announceChanges, findVdiLocation } from "../vdi-records.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import { method } from "../methods.ts";
import { zBool, zRef, zString, zStringMap } from "../../xenapi/params.ts";
import { NULL_REF } from "../../xenapi/values.ts";
import { objectGetters } from "./getters.ts";

export const VBD_CREATE: FieldSpec = {
  VM: [zRef],
  VDI: [zRef, NULL_REF],
  device: [zString, ""],
  userdevice: [zString, "autodetect"],
  bootable: [zBool, false],
  mode: [zString, "RW"],
  type: [zString, "Disk"],
  unpluggable: [zBool, true],
  empty: [zBool, false],
  other_config: [zStringMap, {}],
  qos_algorithm_type: [zString, ""],
  qos_algorithm_params: [zStringMap, {}],
};

const VBD_STATE = {
  allowed_operations: ["attach"],
  current_operations: {},
  storage_lock: false,
  currently_attached: false,
  status_code: 0,
  status_detail: "",
  runtime_properties: {},
  qos_supported_algorithms: [],
  metrics: NULL_REF,
};

const VBD_FIELDS = ["uuid", ...Object.keys(VBD_CREATE), ...Object.keys(VBD_STATE)];

/** A VBD that came or went, for its VDI's event. */
export interface VbdChange {
  vdi: string;
  vbd: string;
  change: "add" | "remove";
}

/**
 * A "mod" event for each VDI whose VBDs changed: its last announced record with the VBDs changed (no plugin
 * call: an SR.ls of a large SR per VBD made a VM's import or removal cost a listing per disk), or, when the log
 * no longer holds one, its SR listed (best effort).
 */
export async function announceVdis(ts: Toolstack, changes: readonly VbdChange[]): Promise<void> {
  const bySr = new Map<string, string[]>();
  for (const [vdi, ofVdi] of Map.groupBy(changes, (change) => change.vdi)) {
    const last = await ts.events.latest("VDI", vdi);
    if (last === null) continue;
    if (last !== undefined) {
      const gone = new Set(ofVdi.filter((c) => c.change === "remove").map((c) => c.vbd));
      const added = ofVdi.filter((c) => c.change === "add").map((c) => c.vbd);
      const vbds = [...new Set([...(last.VBDs as string[]).filter((vbd) => !gone.has(vbd)), ...added])];
      await ts.events.record("VDI", vdi, "mod", { ...last, VBDs: vbds });
      continue;
    }
    const location = await findVdiLocation(ts, vdi);
    if (location !== undefined) bySr.set(location.sr_ref, [...(bySr.get(location.sr_ref) ?? []), vdi]);
  }
  await Promise.all([...bySr].map(([sr, modified]) => announceChanges(ts, sr, { modified })));
}

/** A VM's VBDs take userdevices 0–254 and its VIFs devices 0–63 (xapi's allowed_VBD_devices: 0–254). */
export const MAX_VBD_DEVICE = 254;
export const MAX_VIF_DEVICE = 63;

/**
 * The device number a new VBD or VIF gets: as asked, or with "autodetect" the lowest one free. The range keeps
 * a VM's devices, and so the work of every create, bounded.
 */
export function chooseDevice(wanted: string, taken: readonly string[], field: string, max: number): string {
  const used = new Set(taken);
  if (wanted === "autodetect") {
    for (let device = 0; device <= max; device++) if (!used.has(String(device))) return String(device);
    throw xenErrors.invalidValue(field, `autodetect (devices 0–${max} are all taken)`);
  }
  if (!/^\d+$/.test(wanted) || Number(wanted) > max) throw xenErrors.invalidValue(field, `${wanted} (a device number 0–${max})`);
  if (used.has(String(Number(wanted)))) throw objectErrors.deviceAlreadyExists(wanted);
  return String(Number(wanted));
}

/** A VBD of a VM, listed in the VM's VBDs. */
export async function createVbd(ts: Toolstack, args: Record<string, unknown>): Promise<string> {
  const fields = parseCreateRecord(VBD_CREATE, args);
  const { VM: vm, VDI: vdi, type, mode, empty } = fields as { VM: string; VDI: string; type: string; mode: string; empty: boolean };
  if (!["Disk", "CD", "Floppy"].includes(type)) throw objectErrors.valueNotSupported("type", type, "one of Disk, CD, Floppy");
  if (!["RO", "RW"].includes(mode)) throw objectErrors.valueNotSupported("mode", mode, "RO or RW");
  if (empty ? type !== "CD" || vdi !== NULL_REF : vdi === NULL_REF) throw xenErrors.invalidValue("empty", `${empty} (only a CD is empty, and an empty VBD has no VDI)`);
  if (vdi !== NULL_REF && (await findVdiLocation(ts, vdi)) === undefined) throw xenErrors.handleInvalid("VDI", vdi);
  const ref = await ts.db.transaction(async (tx) => {
    const owner = await ts.objects.get("VM", vm, tx);
    const siblings = await Promise.all((owner.record.VBDs as string[]).map((r) => ts.objects.find("VBD", r, tx)));
    const taken = siblings.flatMap((s) => (s === undefined ? [] : [String(s.record.userdevice)]));
    fields.userdevice = chooseDevice(String(fields.userdevice), taken, "userdevice", MAX_VBD_DEVICE);
    const vbd = await ts.objects.create("VBD", { uuid: crypto.randomUUID(), ...fields, ...structuredClone(VBD_STATE) }, { db: tx });
    await ts.objects.update("VM", vm, (r) => ({ ...r, VBDs: [...(r.VBDs as string[]), vbd.ref] }), tx);
    return vbd.ref;
  });
  if (vdi !== NULL_REF) await announceVdis(ts, [{ vdi, vbd: ref, change: "add" }]);
  return ref;
}

export const vbdCalls = [
  ...objectGetters("VBD", VBD_FIELDS),
  method("VBD.create", [["args", zRecordArg]], ({ ts }, args) => createVbd(ts, args)),
  method("VBD.destroy", [["self", zRef]], async ({ ts }, ref) => {
    const vbd = await ts.db.transaction(async (tx) => {
      const found = await ts.objects.get("VBD", ref, tx);
      await ts.objects.destroy("VBD", ref, tx);
      const vm = await ts.objects.find("VM", String(found.record.VM), tx);
      if (vm !== undefined) await ts.objects.update("VM", vm.ref, (r) => ({ ...r, VBDs: (r.VBDs as string[]).filter((v) => v !== ref) }), tx);
      return found;
    });
    if (vbd.record.VDI !== NULL_REF) await announceVdis(ts, [{ vdi: String(vbd.record.VDI), vbd: ref, change: "remove" }]);
  }),
  fieldSetter("VBD", "bootable", zBool),
  fieldSetter("VBD", "mode", zString, (mode) => {
    if (!["RO", "RW"].includes(mode)) throw objectErrors.valueNotSupported("mode", mode, "RO or RW");
  }),
  ...mapFieldCalls("VBD", "other_config"),
];
