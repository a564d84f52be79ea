// vms.list and vms.get: VMs with their disks (VBD → VDI → SR). One listing per class, never a call per
// disk; the disks' VDIs with VDI.hangar_get_records, one SR.ls per SR that holds one (not VDI.get_all_records:
// every SR's, 100,000 volumes at scale). A VDI on an SR that cannot be listed shows as unknown.
import "server-only";

import { TRPCError } from "@trpc/server";
import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { isListedVm, NULL_REF, type VbdRecord, type VdiRecord, type VmRecord, ZVbdRecord, ZVdiRecord, ZVifRecord, ZVmRecord } from "./records.ts";
import type { TGetVmResponse, TListVmsResponse, TVmDisk, TVmSummary } from "./schema.ts";

interface DiskContext {
  vbds: Record<string, VbdRecord>;
  vdis: Record<string, VdiRecord>;
  srs: Map<string, { name: string; uuid: string } | null>;
}

/** The VBDs, VDIs and SR names that these VMs' disks need. */
async function diskContext(xapi: XenApiClient, vms: VmRecord[], vbds?: Record<string, VbdRecord>): Promise<DiskContext> {
  const wanted = new Set(vms.flatMap((vm) => vm.VBDs));
  const allVbds = wanted.size === 0 ? {} : (vbds ?? (await xapi.records("VBD", ZVbdRecord)));
  const vdiRefs = [...new Set([...wanted].map((ref) => allVbds[ref]?.VDI ?? NULL_REF).filter((vdi) => vdi !== NULL_REF))];
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
  return { vbds: allVbds, vdis, srs };
}

function disksOf(vm: VmRecord, context: DiskContext): TVmDisk[] {
  return vm.VBDs.flatMap((vbdRef) => {
    const vbd = context.vbds[vbdRef];
    if (vbd === undefined) return [];
    const vdi = vbd.VDI === NULL_REF ? undefined : context.vdis[vbd.VDI];
    return [
      {
        vbdRef,
        userdevice: vbd.userdevice,
        type: vbd.type,
        isCd: vbd.type !== "Disk",
        mode: vbd.mode,
        bootable: vbd.bootable,
        empty: vbd.empty || vbd.VDI === NULL_REF,
        vdi:
          vdi === undefined
            ? null
            : { ref: vbd.VDI, uuid: vdi.uuid, name: vdi.name_label, sizeBytes: vdi.virtual_size, srRef: vdi.SR, srName: context.srs.get(vdi.SR)?.name ?? null, srUuid: context.srs.get(vdi.SR)?.uuid ?? null },
      },
    ];
  }).sort((a, b) => Number(a.userdevice) - Number(b.userdevice) || a.userdevice.localeCompare(b.userdevice));
}

function summary(ref: string, vm: VmRecord, context: DiskContext): TVmSummary {
  return {
    ref,
    uuid: vm.uuid,
    name: vm.name_label,
    description: vm.name_description,
    powerState: vm.power_state,
    memoryBytes: vm.memory_static_max,
    vcpus: vm.VCPUs_max,
    disks: disksOf(vm, context),
  };
}

export async function listVms(xapi: XenApiClient): Promise<TListVmsResponse> {
  const vms = Object.entries(await xapi.records("VM", ZVmRecord)).filter(([, vm]) => isListedVm(vm));
  const context = await diskContext(xapi, vms.map(([, vm]) => vm));
  return {
    vms: vms
      .map(([ref, vm]) => summary(ref, vm, context))
      .sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true }) || a.uuid.localeCompare(b.uuid)),
  };
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
  const [context, interfaces] = await Promise.all([
    diskContext(xapi, [vm], vbds),
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
    ...summary(ref, vm, context),
    vcpusAtStartup: vm.VCPUs_at_startup,
    memoryMinBytes: vm.memory_static_min,
    interfaces: interfaces.filter((vif) => vif !== null).sort((a, b) => Number(a.device) - Number(b.device)),
    allowedOperations: vm.allowed_operations,
  };
}
