// The XenAPI fields the VM pages read, checked at the boundary (int64s may come as strings).
import "server-only";

import { z } from "zod";
import { zInt64 } from "../../xenapi/client.ts";

export const NULL_REF = "OpaqueRef:NULL";

export const ZVmRecord = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  name_description: z.string(),
  power_state: z.string(),
  is_a_template: z.boolean(),
  is_control_domain: z.boolean(),
  is_a_snapshot: z.boolean().default(false),
  memory_static_max: zInt64,
  memory_static_min: zInt64,
  VCPUs_max: zInt64,
  VCPUs_at_startup: zInt64,
  VBDs: z.array(z.string()),
  VIFs: z.array(z.string()),
  allowed_operations: z.array(z.string()),
});

export const ZVbdRecord = z.looseObject({
  VDI: z.string(),
  userdevice: z.string(),
  type: z.string(),
  mode: z.string(),
  bootable: z.boolean(),
  empty: z.boolean(),
});

export const ZVdiRecord = z.looseObject({ uuid: z.string(), name_label: z.string(), virtual_size: zInt64, SR: z.string() });

export const ZVifRecord = z.looseObject({ device: z.string(), MAC: z.string(), MTU: zInt64, network: z.string() });

export type VmRecord = z.infer<typeof ZVmRecord>;
export type VbdRecord = z.infer<typeof ZVbdRecord>;
export type VdiRecord = z.infer<typeof ZVdiRecord>;

/** Real VMs: not templates, snapshots or the control domain. */
export function isListedVm(vm: VmRecord): boolean {
  return !vm.is_a_template && !vm.is_control_domain && !vm.is_a_snapshot;
}
