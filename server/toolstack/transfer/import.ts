// PUT /import and /import_metadata, the work itself: the archive read as it arrives (plain, gzip or zstd),
// the VMs with their VBDs and VIFs made from ova.xml, a volume made on the target SR for each disk with data
// and filled through its datapath's NBD export, every block's checksum verified. New refs and uuids always;
// `restore` keeps the VM's uuid and MACs and replaces a halted VM of that uuid. Any failure undoes it all.
import type { Readable } from "node:stream";
import { BufferPool } from "../../buffer-pool.ts";
import { DiskImageError } from "../../disk/image.ts";
import { pacer } from "../../pacer.ts";
import { decompressing } from "../../xva/compression.ts";
import { XVA_BLOCK_SIZE } from "../../xva/format.ts";
import { OvaXmlError } from "../../xva/ova-xml.ts";
import { openXva, type XvaArchive, XvaChecksumError, XvaReadError } from "../../xva/reader.ts";
import { createVbd } from "../calls/vbd.ts";
import { createVdi, vdiByUuid } from "../calls/vdi.ts";
import { createVif } from "../calls/vif.ts";
import { createVm, destroyVm, HALTED_VM_OPERATIONS, VM_CREATE } from "../calls/vm.ts";
import type { AttachedSr } from "../srs.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { VDI_TYPES } from "../vdi-records.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { toXenApiError } from "../xenapi-errors.ts";
import { NULL_REF, type XenRecord, type XenValue } from "../../xenapi/values.ts";
import { checkVersion, type ImportPlan, type PlannedVm, planImport } from "./ova-records.ts";
import { TransferState } from "./transfer-state.ts";
import { openVolume, writeDiskRuns } from "./volume-io.ts";

export interface ImportOptions {
  sr: AttachedSr;
  force: boolean;
  restore: boolean;
}

export interface MetadataImportOptions {
  force: boolean;
  restore: boolean;
  dryRun: boolean;
  /** `vdi:<uuid in the file>=<uuid here>` remappings. */
  vdiMap: ReadonlyMap<string, string>;
}

export const importError = (reason: string) => new XenApiError("IMPORT_ERROR", [reason]);

/** The XenAPI error an import fails with: the toolstack's and plugins' own as they are, anything about the file as IMPORT_ERROR. */
export function asImportError(error: unknown): XenApiError {
  if (error instanceof XvaChecksumError) return importError(`checksum mismatch: ${error.message} (force=true imports anyway)`);
  if (error instanceof XvaReadError || error instanceof OvaXmlError || error instanceof DiskImageError) return importError(error.message);
  if (error instanceof XenApiError) return error;
  const converted = toXenApiError(error);
  return converted.code === "INTERNAL_ERROR" ? importError(converted.params[0] ?? "the archive could not be read") : converted;
}

/** VM.create's fields from a VM record of the file: references to the file's objects dropped. */
function vmArguments(record: XenRecord): Record<string, XenValue> {
  const args: Record<string, XenValue> = {};
  for (const field of Object.keys(VM_CREATE)) if (record[field] !== undefined) args[field] = record[field];
  for (const field of ["affinity", "protection_policy", "snapshot_schedule", "appliance", "suspend_SR"]) args[field] = NULL_REF;
  return args;
}

/** The network a VIF of the file joins here: same bridge, else same name, else the first network. */
async function networkFor(ts: Toolstack, wanted: XenRecord | undefined): Promise<string> {
  const networks = await ts.objects.all("network");
  if (networks.length === 0) throw importError("this pool has no network for the VM's interfaces");
  const match =
    (wanted === undefined ? undefined : networks.find((n) => wanted.bridge !== undefined && n.record.bridge === wanted.bridge)) ??
    (wanted === undefined ? undefined : networks.find((n) => wanted.name_label !== undefined && n.record.name_label === wanted.name_label));
  return (match ?? networks[0]!).ref;
}

/** Makes the VMs of the plan, each with its VBDs (disks from `vdis`, by file id) and VIFs; marked as being imported. */
async function createVms(ts: Toolstack, task: string, state: TransferState, plan: PlannedVm[], vdis: ReadonlyMap<string, string>, restore: boolean): Promise<string[]> {
  const refs: string[] = [];
  const pace = pacer();
  for (const vm of plan) {
    const ref = await createVm(ts, vmArguments(vm.record));
    await state.addVm(ref);
    refs.push(ref);
    for (const vbd of vm.vbds) {
      const vdi = vbd.disk === undefined ? NULL_REF : (vdis.get(vbd.disk) ?? NULL_REF);
      if (vbd.disk !== undefined && vdi === NULL_REF) continue;
      await createVbd(ts, { ...vbd.record, VM: ref, VDI: vdi, empty: vdi === NULL_REF, type: vdi === NULL_REF ? "CD" : vbd.record.type });
      await pace();
    }
    for (const vif of vm.vifs) {
      await createVif(ts, { ...vif.record, VM: ref, network: await networkFor(ts, vif.network), MAC: restore ? (vif.record.MAC ?? "") : "" });
      await pace();
    }
    await ts.objects.set("VM", ref, { current_operations: { [task]: "import" }, allowed_operations: [] });
  }
  return refs;
}

/** Success: the VMs become usable; with `restore` each takes its exported uuid, replacing a halted VM that has it. */
async function finishVms(ts: Toolstack, refs: readonly string[], plan: PlannedVm[], restore: boolean): Promise<void> {
  for (const [n, ref] of refs.entries()) {
    const uuid = String(plan[n]!.record.uuid ?? "");
    const keepUuid = restore && /^[0-9a-f-]{36}$/i.test(uuid);
    if (keepUuid) {
      const original = await ts.objects.getByUuid("VM", uuid).catch(() => undefined);
      if (original !== undefined) {
        if (original.record.power_state !== "Halted") throw new XenApiError("VM_BAD_POWER_STATE", [original.ref, "Halted", String(original.record.power_state)]);
        await destroyVm(ts, original.ref);
      }
    }
    await ts.objects.set("VM", ref, {
      current_operations: {},
      allowed_operations: [...HALTED_VM_OPERATIONS],
      ...(keepUuid ? { uuid } : {}),
    });
  }
}

/** Makes the disks of the plan on the SR (thin, full size); answers file id → VDI ref and volume key. */
async function createDisks(ts: Toolstack, state: TransferState, plan: ImportPlan, sr: AttachedSr): Promise<Map<string, { vdi: string; key: string; uris: string[] }>> {
  const made = new Map<string, { vdi: string; key: string; uris: string[] }>();
  const pace = pacer();
  for (const disk of plan.disks.values()) {
    await pace();
    const type = String(disk.record.type ?? "user");
    const created = await createVdi(ts, {
      SR: sr.ref,
      virtual_size: disk.size,
      name_label: disk.record.name_label ?? "",
      name_description: disk.record.name_description ?? "",
      type: (VDI_TYPES as readonly string[]).includes(type) ? type : "user",
      sharable: disk.record.sharable === true,
      other_config: disk.record.other_config ?? {},
    }, { own: (key, tx) => state.addVolume(sr.ref, key, tx) });
    made.set(disk.id, { vdi: created.ref, key: created.key, uris: created.uris });
  }
  return made;
}

/** Reads the archive's disks into the made volumes; answers how many blocks failed their checksum (force only). */
async function fillDisks(ts: Toolstack, control: TaskControl, state: TransferState, archive: XvaArchive, plan: ImportPlan, sr: AttachedSr, made: ReadonlyMap<string, { key: string; uris: string[] }>): Promise<number> {
  const total = [...plan.disks.values()].reduce((sum, disk) => sum + disk.size, 0);
  let before = 0;
  let mismatches = 0;
  const filled = new Set<string>();
  for await (const disk of archive.disks(plan.sizes)) {
    const target = made.get(disk.ref);
    // Data of a disk the VMs do not use (a suspend image, a CD's ISO): read, checked, left.
    if (target === undefined) continue;
    const volume = await openVolume(ts, sr, target.key, "rw", (attachment) => state.addAttachment(attachment), target.uris);
    try {
      const blocks = (async function* () {
        for await (const block of disk.blocks) {
          if (block.checksumMismatch === true) mismatches++;
          yield block;
        }
      })();
      await writeDiskRuns(volume.client, blocks, {
        zeroed: true,
        onRun: (end) => {
          control.signal.throwIfAborted();
          if (total > 0) control.progress((before + end) / total);
        },
        // Whole blocks go back to the reader's pool; a trimmed last block is a view, left to the GC.
        done: (data) => data.byteLength === XVA_BLOCK_SIZE && data.byteOffset === 0 && blockBuffers.give(data),
      });
    } finally {
      await volume.close();
      await state.released(volume.attachment);
    }
    before += plan.disks.get(disk.ref)!.size;
    filled.add(disk.ref);
  }
  const missing = [...plan.disks.values()].filter((disk) => !filled.has(disk.id));
  if (missing.length > 0) throw importError(`the archive ended without the data of disk ${missing.map((d) => `${d.id} (${String(d.record.name_label ?? "")})`).join(", ")}: truncated`);
  return mismatches;
}

/** Blocks' buffers, reused from one written block to the next read (shared by the imports of the process). */
const blockBuffers = new BufferPool(24 * XVA_BLOCK_SIZE);

/** Opens the (possibly compressed) archive up to its ova.xml, and plans what importing it makes. */
async function openPlanned(source: Readable, force: boolean): Promise<{ archive: XvaArchive; plan: ImportPlan }> {
  const { stream } = await decompressing(source);
  const archive = await openXva(stream, { force, blockBuffers });
  try {
    checkVersion(archive.metadata.version);
    return { archive, plan: planImport(archive.metadata) };
  } catch (error) {
    archive.close();
    throw error;
  }
}

/** /import: answers the refs of the VMs made. */
export async function importVm(ts: Toolstack, control: TaskControl, source: Readable, options: ImportOptions): Promise<string[]> {
  const state = new TransferState(ts, control, "import");
  let archive: XvaArchive | undefined;
  try {
    let plan: ImportPlan;
    ({ archive, plan } = await openPlanned(source, options.force));
    const made = await createDisks(ts, state, plan, options.sr);
    const vms = await createVms(ts, control.ref, state, plan.vms, new Map([...made].map(([id, disk]) => [id, disk.vdi])), options.restore);
    const mismatches = await fillDisks(ts, control, state, archive, plan, options.sr, made);
    if (mismatches > 0) console.warn(`import task ${control.ref}: ${mismatches} block(s) failed their checksum; kept (force=true)`);
    control.signal.throwIfAborted();
    await finishVms(ts, vms, plan.vms, options.restore);
    await state.keep();
    return vms;
  } catch (error) {
    archive?.close();
    source.destroy();
    await state.undo();
    throw control.signal.aborted ? error : asImportError(error);
  }
}

/** The VDI here a VBD of the file points at: remapped, else the same uuid; undefined when there is none. */
async function existingVdi(ts: Toolstack, record: XenRecord | undefined, vdiMap: ReadonlyMap<string, string>): Promise<string | undefined> {
  const uuid = String(record?.uuid ?? "");
  if (uuid === "") return undefined;
  return vdiByUuid(ts, vdiMap.get(uuid) ?? uuid).catch(() => undefined);
}

/** /import_metadata: the VMs of ova.xml linked to VDIs that exist here (no data is read). */
export async function importMetadata(ts: Toolstack, control: TaskControl, source: Readable, options: MetadataImportOptions): Promise<string[]> {
  const state = new TransferState(ts, control, "import");
  let archive: XvaArchive | undefined;
  try {
    let plan: ImportPlan;
    ({ archive, plan } = await openPlanned(source, options.force));
    const byId = new Map(archive.metadata.objects.map((object) => [object.id, object.snapshot]));
    const vdis = new Map<string, string>();
    for (const disk of plan.disks.values()) {
      const found = await existingVdi(ts, byId.get(disk.id), options.vdiMap);
      if (found !== undefined) vdis.set(disk.id, found);
      else if (!options.force) throw importError(`disk ${disk.id} (uuid ${String(disk.record.uuid ?? "?")}, ${String(disk.record.name_label ?? "")}) has no VDI here; remap it with vdi:<uuid>=<uuid> or import with force=true to leave it out`);
    }
    if (options.dryRun) return [];
    const vms = await createVms(ts, control.ref, state, plan.vms, vdis, options.restore);
    await finishVms(ts, vms, plan.vms, options.restore);
    await state.keep();
    return vms;
  } catch (error) {
    await state.undo();
    throw control.signal.aborted ? error : asImportError(error);
  } finally {
    archive?.close();
  }
}
