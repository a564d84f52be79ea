// The VM of an import made through XenAPI as Xen Orchestra and XenCenter make one: VM.create from the
// descriptor's facts, a VDI per disk, VBDs in the descriptor's order (the first disk bootable, CD drives empty),
// VIFs on the pool's default network. Everything made is marked `hangar:import` = the import's id in its
// other_config, so that an import that stops half way (the console restarted, the client gone) is undone by the
// next attempt (undoEarlier) as by this one (undo); the mark goes once the import is done.
import { z } from "zod";
import type { XenApiClient } from "../xenapi/client.ts";
import { NULL_REF } from "../xenapi/values.ts";
import type { OvfPackage } from "./descriptor.ts";

/** The other_config key marking what an import made until it is done. */
export const IMPORT_MARK = "hangar:import";

const zRef = z.string();
const zMarked = z.record(z.string(), z.looseObject({ other_config: z.record(z.string(), z.string()).default({}) }));
const zNetwork = z.record(z.string(), z.looseObject({ bridge: z.string().default(""), name_label: z.string().default("") }));

export interface BuiltDisk {
  vdi: string;
  /** The drive's index among the package's drives. */
  drive: number;
}

/** What the VM's guest OS is, kept in its other_config (xapi has no field for it). */
export function osConfig(ovf: OvfPackage): Record<string, string> {
  const config: Record<string, string> = {};
  if (ovf.os.id !== null) config["ovf-os-id"] = String(ovf.os.id);
  if (ovf.os.type !== "") config["ovf-os-type"] = ovf.os.type;
  if (ovf.os.description !== "") config["ovf-os-description"] = ovf.os.description;
  if (ovf.hardware !== "") config["ovf-virtual-system-type"] = ovf.hardware;
  return config;
}

export class VmBuilder {
  readonly #xapi: XenApiClient;
  readonly #mark: string;
  vm: string | undefined;
  readonly vdis: string[] = [];

  constructor(xapi: XenApiClient, mark: string) {
    this.#xapi = xapi;
    this.#mark = mark;
  }

  /** The network a new NIC joins: xapi's management bridge (xenbr0), else the first there is; undefined for none. */
  async defaultNetwork(): Promise<string | undefined> {
    const networks = Object.entries(await this.#xapi.records("network", zNetwork.valueType));
    return (networks.find(([, n]) => n.bridge === "xenbr0") ?? networks[0])?.[0];
  }

  async createVm(ovf: Pick<OvfPackage, "name" | "description" | "memory" | "vcpus" | "firmware" | "secureBoot">, otherConfig: Record<string, string>): Promise<string> {
    const memory = ovf.memory;
    this.vm = await this.#xapi.call(zRef, "VM.create", {
      name_label: ovf.name,
      name_description: ovf.description,
      memory_static_max: memory,
      memory_dynamic_max: memory,
      memory_dynamic_min: memory,
      memory_static_min: memory,
      memory_target: memory,
      VCPUs_max: ovf.vcpus,
      VCPUs_at_startup: ovf.vcpus,
      HVM_boot_policy: "BIOS order",
      HVM_boot_params: { order: "cd", firmware: ovf.firmware },
      platform: ovf.secureBoot ? { secureboot: "true" } : {},
      other_config: { ...otherConfig, [IMPORT_MARK]: this.#mark },
    });
    return this.vm;
  }

  async createVdi(sr: string, size: number, name: string, description: string): Promise<string> {
    const vdi = await this.#xapi.call(zRef, "VDI.create", { SR: sr, virtual_size: size, name_label: name, name_description: description, type: "user", other_config: { [IMPORT_MARK]: this.#mark } });
    this.vdis.push(vdi);
    return vdi;
  }

  /** A VDI made by someone else (a disk import into a new VDI) that this import now owns. */
  async adoptVdi(vdi: string): Promise<void> {
    this.vdis.push(vdi);
    await this.#xapi.call(z.unknown(), "VDI.add_to_other_config", vdi, IMPORT_MARK, this.#mark);
  }

  async attachDisk(vdi: string, userdevice: number, bootable: boolean): Promise<void> {
    await this.#xapi.call(zRef, "VBD.create", { VM: this.vm, VDI: vdi, userdevice: String(userdevice), bootable, mode: "RW", type: "Disk", empty: false, other_config: {} });
  }

  async attachCd(userdevice: number): Promise<void> {
    await this.#xapi.call(zRef, "VBD.create", { VM: this.vm, VDI: NULL_REF, userdevice: String(userdevice), bootable: false, mode: "RO", type: "CD", empty: true, other_config: {} });
  }

  async attachNic(network: string, device: number, mac: string | null): Promise<void> {
    await this.#xapi.call(zRef, "VIF.create", { VM: this.vm, network, device: String(device), MAC: mac ?? "", MTU: 1500, other_config: {} });
  }

  /** The import is done: the marks go (what is left is the user's). */
  async finish(): Promise<void> {
    for (const vdi of this.vdis) await this.#xapi.call(z.unknown(), "VDI.remove_from_other_config", vdi, IMPORT_MARK);
    if (this.vm !== undefined) await this.#xapi.call(z.unknown(), "VM.remove_from_other_config", this.vm, IMPORT_MARK);
  }

  /** Removes what this import made (its VM with its VBDs and VIFs, then its VDIs); every step tried. */
  async undo(): Promise<void> {
    await removeMade(this.#xapi, this.vm === undefined ? [] : [this.vm], this.vdis);
  }
}

async function removeMade(xapi: XenApiClient, vms: string[], vdis: string[]): Promise<void> {
  for (const vm of vms) await xapi.call(z.unknown(), "VM.destroy", vm).catch(() => undefined);
  for (const vdi of vdis) await xapi.call(z.unknown(), "VDI.destroy", vdi).catch(() => undefined);
}

/** Removes what an earlier attempt of the import `mark` left (a restart: the whole package is imported again). */
export async function undoEarlier(xapi: XenApiClient, mark: string): Promise<void> {
  const marked = (records: z.infer<typeof zMarked>) => Object.entries(records).filter(([, r]) => r.other_config[IMPORT_MARK] === mark).map(([ref]) => ref);
  const vms = marked(await xapi.records("VM", zMarked.valueType));
  const vdis = marked(await xapi.records("VDI", zMarked.valueType));
  await removeMade(xapi, vms, vdis);
}
