// vms.list, vms.volumes and vms.get: VMs with their drives (VBD → VDI → SR). One listing per class, never a call
// per disk. The list comes in two parts: the VMs with their drives (VM and VBD records: fast at any size), and
// the drives' volumes (vms.volumes), which cost a listing of each SR that holds one (VDI.hangar_get_records: an
// SR.ls; not VDI.get_all_records, every SR's, 100,000 volumes at scale), so the page shows its VMs first.
// A VDI on an SR that cannot be listed shows as unknown.
import "server-only";

import { TRPCError } from "@trpc/server";
import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { isListedVm, NULL_REF, type VbdRecord, type VmRecord, ZVbdRecord, ZVdiRecord, ZVifRecord, ZVmRecord } from "./records.ts";
import { type TGetVmResponse, type TListedVm, type TListVmsResponse, type TListVmVolumesResponse, type TVmListDisk, type TVmVolume, withVolume } from "./schema.ts";

/** The VMs the console lists, with the VBDs of their drives. */
async function listedVms(xapi: XenApiClient): Promise<{ vms: Array<[string, VmRecord]>; vbds: Record<string, VbdRecord> }> {
  const vms = Object.entries(await xapi.records("VM", ZVmRecord)).filter(([, vm]) => isListedVm(vm));
  const vbds = vms.some(([, vm]) => vm.VBDs.length > 0) ? await xapi.records("VBD", ZVbdRecord) : {};
  return { vms, vbds };
}

/** These VDIs as volumes with their SR's name, by ref; one missing is one the toolstack cannot list now. */
async function volumesOf(xapi: XenApiClient, vdiRefs: string[]): Promise<Record<string, TVmVolume>> {
  const vdis = vdiRefs.length === 0 ? {} : await xapi.call(z.record(z.string(), ZVdiRecord), "VDI.hangar_get_records", vdiRefs);
  const srRefs = new Set(Object.values(vdis).map((vdi) => vdi.SR));
  // Getters, not SR.get_record: a record asks the plugin for live space, which the VM pages do not show.
  const srs = new Map(
    await Promise.all(
      [...srRefs].map(async (sr) => {
        const info = await Promise.all([xapi.call(z.string(), "SR.get_name_label", sr), xapi.call(z.string(), "SR.get_uuid", sr)]).catch(() => null);
        return [sr, info === null ? null : { name: info[0], uuid: info[1] }] as const;
      }),
    ),
  );
  return Object.fromEntries(
    Object.entries(vdis).map(([ref, vdi]) => [
      ref,
      { ref, uuid: vdi.uuid, name: vdi.name_label, sizeBytes: vdi.virtual_size, srRef: vdi.SR, srName: srs.get(vdi.SR)?.name ?? null, srUuid: srs.get(vdi.SR)?.uuid ?? null },
    ]),
  );
}

function drivesOf(vm: VmRecord, vbds: Record<string, VbdRecord>): TVmListDisk[] {
  return vm.VBDs.flatMap((vbdRef) => {
    const vbd = vbds[vbdRef];
    if (vbd === undefined) return [];
    const empty = vbd.empty || vbd.VDI === NULL_REF;
    return [{ vbdRef, userdevice: vbd.userdevice, type: vbd.type, isCd: vbd.type !== "Disk", mode: vbd.mode, bootable: vbd.bootable, empty, vdiRef: vbd.VDI === NULL_REF ? null : vbd.VDI }];
  }).sort((a, b) => Number(a.userdevice) - Number(b.userdevice) || a.userdevice.localeCompare(b.userdevice));
}

const volumeRefs = (drives: TVmListDisk[]) => drives.flatMap((drive) => (drive.vdiRef === null ? [] : [drive.vdiRef]));

function summary(ref: string, vm: VmRecord, vbds: Record<string, VbdRecord>): TListedVm {
  return {
    ref,
    uuid: vm.uuid,
    name: vm.name_label,
    description: vm.name_description,
    powerState: vm.power_state,
    memoryBytes: vm.memory_static_max,
    vcpus: vm.VCPUs_max,
    disks: drivesOf(vm, vbds),
  };
}

export async function listVms(xapi: XenApiClient): Promise<TListVmsResponse> {
  const { vms, vbds } = await listedVms(xapi);
  return {
    vms: vms
      .map(([ref, vm]) => summary(ref, vm, vbds))
      .sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }) || a.uuid.localeCompare(b.uuid)),
  };
}

/** The volumes of every listed VM's drives. */
export async function listVmVolumes(xapi: XenApiClient): Promise<TListVmVolumesResponse> {
  const { vms, vbds } = await listedVms(xapi);
  const refs = new Set(vms.flatMap(([, vm]) => volumeRefs(drivesOf(vm, vbds))));
  return { volumes: await volumesOf(xapi, [...refs]) };
}

const ZNetworkName = z.string();

/** A drive or interface removed between reading the VM and reading it (another window): left out, not an error. */
async function unlessGone<T>(read: Promise<T>): Promise<T | null> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof XenApiError && error.code === "HANDLE_INVALID") return null;
    throw error;
  }
}

export async function getVm(xapi: XenApiClient, ref: string): Promise<TGetVmResponse> {
  let vm: VmRecord;
  try {
    vm = await xapi.call(ZVmRecord, "VM.get_record", ref);
  } catch (error) {
    if (error instanceof XenApiError && error.code === "HANDLE_INVALID") throw new TRPCError({ code: "NOT_FOUND", message: "This VM no longer exists: it may have been removed in another window.", cause: error });
    throw error;
  }
  if (!isListedVm(vm)) throw new TRPCError({ code: "NOT_FOUND", message: "This is not a VM the console shows (a template, snapshot or the control domain)." });
  const vbds = Object.fromEntries(
    (await Promise.all(vm.VBDs.map(async (vbd) => [vbd, await unlessGone(xapi.call(ZVbdRecord, "VBD.get_record", vbd))] as const))).filter(
      (entry): entry is readonly [string, VbdRecord] => entry[1] !== null,
    ),
  );
  const drives = drivesOf(vm, vbds);
  const [volumes, interfaces] = await Promise.all([
    volumesOf(xapi, volumeRefs(drives)),
    Promise.all(
      vm.VIFs.map(async (vifRef) => {
        const vif = await unlessGone(xapi.call(ZVifRecord, "VIF.get_record", vifRef));
        if (vif === null) return null;
        const networkName = vif.network === NULL_REF ? null : await xapi.call(ZNetworkName, "network.get_name_label", vif.network).catch(() => null);
        return { ref: vifRef, device: vif.device, mac: vif.MAC, mtu: vif.MTU, networkRef: vif.network, networkName };
      }),
    ),
  ]);
  return {
    ...summary(ref, vm, vbds),
    disks: drives.map((drive) => withVolume(drive, volumes)),
    vcpusAtStartup: vm.VCPUs_at_startup,
    memoryMinBytes: vm.memory_static_min,
    interfaces: interfaces.filter((vif) => vif !== null).sort((a, b) => Number(a.device) - Number(b.device)),
    allowedOperations: vm.allowed_operations,
  };
}
