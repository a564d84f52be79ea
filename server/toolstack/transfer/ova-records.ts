// A VM as ova.xml holds it, both ways. Export: the VM's full records and those of its VBDs, VDIs, their SRs,
// VIFs and networks, every reference turned into the id of an object in the file (or OpaqueRef:NULL).
// Import: which VMs, disks and interfaces the file describes, and which disks carry data (compat-notes §2).
import { hostname } from "node:os";
import type { OvaObject, OvaXml } from "../../xva/ova-xml.ts";
import { MAX_VBD_DEVICE, MAX_VIF_DEVICE } from "../calls/vbd.ts";
import type { StoredObject } from "../objects.ts";
import { API_VERSION, type Toolstack } from "../toolstack.ts";
import { locateVdi, type LocatedVdi, vdiRecord } from "../vdi-records.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { NULL_REF, present, xenDate, type XenRecord, type XenValue } from "../../xenapi/values.ts";

/** The version block Hangar writes: low xapi numbers, which every importer accepts (compat-notes §2). */
export function exportVersion(date = new Date()): OvaXml["version"] {
  return { hostname: hostname(), date: xenDate(date), product_version: "0.1.0", product_brand: "Hangar", build_number: "", xapi_major: 1, xapi_minor: 20, export_vsn: 2 };
}

/** The newest archive this importer reads: xapi's version order, then the export layout version. */
const NEWEST = { major: API_VERSION.major, minor: API_VERSION.minor, exportVsn: 2 };

export function checkVersion(version: OvaXml["version"]): void {
  const { xapi_major: major, xapi_minor: minor, export_vsn: vsn } = version;
  if (major > NEWEST.major || (major === NEWEST.major && minor > NEWEST.minor) || vsn > NEWEST.exportVsn) {
    throw new XenApiError("IMPORT_INCOMPATIBLE_VERSION", [`the archive is from xapi ${major}.${minor} (export version ${vsn}); this importer reads up to ${NEWEST.major}.${NEWEST.minor} (export version ${NEWEST.exportVsn})`]);
  }
}

export interface ExportDisk {
  /** The VDI's id in the file. */
  id: string;
  vdi: LocatedVdi;
  size: number;
}

export interface VmExport {
  ova: OvaXml;
  name: string;
  disks: ExportDisk[];
}

/** Every reference of a record's own fields mapped to a file id; references to objects not in the file become null. */
function mapReferences(record: XenRecord, ids: ReadonlyMap<string, string>): XenRecord {
  const map = (value: XenValue): XenValue => (typeof value === "string" && value.startsWith("OpaqueRef:") ? (ids.get(value) ?? NULL_REF) : value);
  const out: XenRecord = {};
  for (const [field, value] of Object.entries(record)) {
    out[field] = Array.isArray(value) ? value.map(map).filter((v) => v !== NULL_REF) : map(value);
  }
  return out;
}

/**
 * The ova.xml of a VM and the disks whose data follows it (its non-CD, non-empty VBDs' VDIs). SRs go with their
 * stored fields only: live space figures would make two exports of an unchanged VM differ (resume needs them equal).
 */
export async function describeVm(ts: Toolstack, vm: StoredObject, date = new Date()): Promise<VmExport> {
  const objects: Array<{ cls: string; ref: string; record: XenRecord }> = [{ cls: "VM", ref: vm.ref, record: present("VM", vm.record) }];
  const disks: Array<{ ref: string; vdi: LocatedVdi; size: number }> = [];
  const seen = new Set<string>([vm.ref]);
  const add = (cls: string, ref: string, record: XenRecord) => {
    if (seen.has(ref)) return;
    seen.add(ref);
    objects.push({ cls, ref, record });
  };
  for (const vbdRef of vm.record.VBDs as string[]) {
    const vbd = await ts.objects.find("VBD", vbdRef);
    if (vbd === undefined) continue;
    add("VBD", vbd.ref, vbd.record);
    const vdiRef = String(vbd.record.VDI);
    if (vdiRef === NULL_REF || seen.has(vdiRef)) continue;
    const vdi = await locateVdi(ts, vdiRef);
    const record = await vdiRecord(ts, vdi);
    add("VDI", vdiRef, record);
    const sr = await ts.objects.get("SR", vdi.sr.ref);
    // Without its space figures, which change with every write to the SR: the export's bytes, and so its ETag (a
    // resumed download's `etag`), are the VM's, not the SR's of the moment.
    const { physical_size: _size, physical_utilisation: _used, virtual_allocation: _allocated, ...srRecord } = sr.record;
    add("SR", sr.ref, srRecord);
    if (vbd.record.type !== "CD" && vbd.record.empty !== true && srRecord.content_type !== "iso") disks.push({ ref: vdiRef, vdi, size: Number(record.virtual_size) });
  }
  for (const vifRef of vm.record.VIFs as string[]) {
    const vif = await ts.objects.find("VIF", vifRef);
    if (vif === undefined) continue;
    add("VIF", vif.ref, vif.record);
    const network = await ts.objects.find("network", String(vif.record.network));
    if (network !== undefined) add("network", network.ref, network.record);
  }
  const ids = new Map(objects.map((object, n) => [object.ref, `Ref:${n}`]));
  const ova: OvaXml = {
    version: exportVersion(date),
    objects: objects.map((object): OvaObject => ({ class: object.cls, id: ids.get(object.ref)!, snapshot: mapReferences({ ...object.record, ...(object.cls === "VM" ? { power_state: "Halted" } : {}) }, ids) })),
  };
  return { ova, name: String(vm.record.name_label), disks: disks.map((disk) => ({ id: ids.get(disk.ref)!, vdi: disk.vdi, size: disk.size })) };
}

// ---- import ----

export interface PlannedVbd {
  record: XenRecord;
  /** The file id of the disk whose data fills it; undefined: an empty CD drive. */
  disk?: string;
}

export interface PlannedVm {
  id: string;
  record: XenRecord;
  vbds: PlannedVbd[];
  vifs: Array<{ record: XenRecord; network?: XenRecord }>;
}

export interface PlannedDisk {
  id: string;
  record: XenRecord;
  size: number;
}

export interface ImportPlan {
  vms: PlannedVm[];
  /** Disks to create and fill, by file id. */
  disks: Map<string, PlannedDisk>;
  /** Declared sizes of every VDI in the file: what the archive reader checks members against. */
  sizes: Map<string, number>;
}

/** What one archive may make (README "Limits"): a VM's devices as VBD.create and VIF.create allow them. */
export const IMPORT_LIMITS = { vms: 100, vbdsPerVm: MAX_VBD_DEVICE + 1, vifsPerVm: MAX_VIF_DEVICE + 1, disks: 1024 };

const asList = (value: XenValue | undefined): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : []);

const tooMany = (what: string, limit: number) => new XenApiError("IMPORT_ERROR", [`ova.xml: ${what}; an import takes at most ${limit}`]);

/** What importing the file makes: its VMs (snapshots left out), their VBDs and VIFs, and the disks to fill. */
export function planImport(ova: OvaXml): ImportPlan {
  const byId = new Map(ova.objects.map((object) => [object.id, object]));
  const sizes = new Map<string, number>();
  for (const object of ova.objects) {
    if (object.class !== "VDI") continue;
    const size = Number(object.snapshot.virtual_size);
    if (!Number.isSafeInteger(size) || size < 0) throw new XenApiError("IMPORT_ERROR", [`ova.xml: VDI ${object.id} has no valid virtual_size (${String(object.snapshot.virtual_size)})`]);
    sizes.set(object.id, size);
  }
  const disks = new Map<string, PlannedDisk>();
  const vms: PlannedVm[] = [];
  for (const object of ova.objects) {
    if (object.class !== "VM" || object.snapshot.is_a_snapshot === true || object.snapshot.is_control_domain === true) continue;
    const vbdIds = asList(object.snapshot.VBDs);
    const vifIds = asList(object.snapshot.VIFs);
    if (vbdIds.length > IMPORT_LIMITS.vbdsPerVm) throw tooMany(`VM ${object.id} has ${vbdIds.length} VBDs`, IMPORT_LIMITS.vbdsPerVm);
    if (vifIds.length > IMPORT_LIMITS.vifsPerVm) throw tooMany(`VM ${object.id} has ${vifIds.length} VIFs`, IMPORT_LIMITS.vifsPerVm);
    if (vms.length === IMPORT_LIMITS.vms) throw tooMany("the archive has more VMs", IMPORT_LIMITS.vms);
    const vbds: PlannedVbd[] = [];
    for (const vbdId of vbdIds) {
      const vbd = byId.get(vbdId);
      if (vbd === undefined || vbd.class !== "VBD") continue;
      const vdi = byId.get(String(vbd.snapshot.VDI));
      const sr = vdi === undefined ? undefined : byId.get(String(vdi.snapshot.SR));
      const carriesData = vdi?.class === "VDI" && vbd.snapshot.type !== "CD" && vbd.snapshot.empty !== true && sr?.snapshot.content_type !== "iso";
      if (vdi !== undefined && carriesData) {
        if (sr === undefined || sr.class !== "SR") throw new XenApiError("IMPORT_ERROR", [`ova.xml: disk ${vdi.id}'s SR is not in the file`]);
        disks.set(vdi.id, { id: vdi.id, record: vdi.snapshot, size: sizes.get(vdi.id)! });
        vbds.push({ record: vbd.snapshot, disk: vdi.id });
      } else if (vbd.snapshot.type === "CD") {
        // Its ISO is not in the archive: the drive comes back empty.
        vbds.push({ record: vbd.snapshot });
      }
    }
    const vifs = vifIds.flatMap((vifId) => {
      const vif = byId.get(vifId);
      if (vif === undefined || vif.class !== "VIF") return [];
      const network = byId.get(String(vif.snapshot.network));
      return [{ record: vif.snapshot, network: network?.class === "network" ? network.snapshot : undefined }];
    });
    vms.push({ id: object.id, record: object.snapshot, vbds, vifs });
  }
  if (vms.length === 0) throw new XenApiError("IMPORT_ERROR", ["ova.xml describes no VM"]);
  if (disks.size > IMPORT_LIMITS.disks) throw tooMany(`the archive's VMs have ${disks.size} disks`, IMPORT_LIMITS.disks);
  return { vms, disks, sizes };
}
