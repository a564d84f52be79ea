// What the vms router accepts and returns. Sizes are bytes (the UI formats them); refs are XenAPI refs.
import { z } from "zod";

const ZRef = z.string().trim().min(1, "Name a VM").max(255);

/** A volume a VM's drive holds, with the SR it is on. */
export const ZVmVolume = z.object({
  ref: z.string(),
  uuid: z.string(),
  name: z.string(),
  sizeBytes: z.number(),
  srRef: z.string(),
  /** null when the SR's name could not be read (the SR is gone or unreachable). */
  srName: z.string().nullable(),
  /** The SR page's address uses it (`/storage/<uuid>`); null like srName. */
  srUuid: z.string().nullable(),
});

const ZVmDrive = z.object({
  vbdRef: z.string(),
  /** "0", "1", … as the VM sees its devices. */
  userdevice: z.string(),
  type: z.string(),
  /** A CD (or floppy) drive rather than a disk. */
  isCd: z.boolean(),
  mode: z.string(),
  bootable: z.boolean(),
  /** Nothing inserted (CD drives). */
  empty: z.boolean(),
});

export const ZVmDisk = ZVmDrive.extend({
  /** null for an empty drive, or a volume the toolstack cannot list now (its SR unreachable). */
  vdi: ZVmVolume.nullable(),
});

/** A drive as the list has it: its volume's ref only; the volumes come apart (vms.volumes), as they cost an SR listing. */
export const ZVmListDisk = ZVmDrive.extend({
  /** null for an empty drive. */
  vdiRef: z.string().nullable(),
});

export const ZVmSummary = z.object({
  ref: z.string(),
  uuid: z.string(),
  name: z.string(),
  description: z.string(),
  powerState: z.string(),
  /** memory_static_max: what the VM may be given at most. */
  memoryBytes: z.number(),
  vcpus: z.number(),
  disks: z.array(ZVmDisk),
});

export const ZVmInterface = z.object({
  ref: z.string(),
  device: z.string(),
  mac: z.string(),
  mtu: z.number(),
  networkRef: z.string(),
  networkName: z.string().nullable(),
});

export const ZListVmsResponse = z.object({ vms: z.array(ZVmSummary.extend({ disks: z.array(ZVmListDisk) })) });
/** The volumes of the listed VMs' drives, by ref; a ref missing is a volume the toolstack cannot list now. */
export const ZListVmVolumesResponse = z.object({ volumes: z.record(z.string(), ZVmVolume) });

export const ZGetVmSchema = z.object({ ref: ZRef });
export const ZGetVmResponse = ZVmSummary.extend({
  vcpusAtStartup: z.number(),
  memoryMinBytes: z.number(),
  interfaces: z.array(ZVmInterface),
  allowedOperations: z.array(z.string()),
});

export const ZRenameVmSchema = z.object({ ref: ZRef, name: z.string().trim().min(1, "Give the VM a name").max(255, "Use at most 255 characters") });
export const ZSetVmDescriptionSchema = z.object({ ref: ZRef, description: z.string().trim().max(1024, "Use at most 1024 characters") });
export const ZDestroyVmSchema = z.object({ ref: ZRef, keepDisks: z.boolean() });
export const ZVmChangeResponse = z.object({ task: z.string() });

export type TVmVolume = z.infer<typeof ZVmVolume>;
export type TVmDisk = z.infer<typeof ZVmDisk>;
export type TVmListDisk = z.infer<typeof ZVmListDisk>;

/** A listed drive with its volume from `volumes` (by ref); null when the drive is empty or the volume unknown. */
export function withVolume({ vdiRef, ...drive }: TVmListDisk, volumes: Readonly<Record<string, TVmVolume>> | undefined): TVmDisk {
  return { ...drive, vdi: vdiRef === null ? null : (volumes?.[vdiRef] ?? null) };
}
export type TVmSummary = z.infer<typeof ZVmSummary>;
export type TVmInterface = z.infer<typeof ZVmInterface>;
export type TListVmsResponse = z.infer<typeof ZListVmsResponse>;
export type TListedVm = TListVmsResponse["vms"][number];
export type TListVmVolumesResponse = z.infer<typeof ZListVmVolumesResponse>;
export type TGetVmResponse = z.infer<typeof ZGetVmResponse>;
