// An OVF descriptor read into the VM it describes (DMTF DSP0243 1.x and 2.x, and VMware's 0.9), as VMware,
// VirtualBox, qemu/Proxmox and Xen Orchestra write them (docs/research/ova-ovf.md §2): its name, memory, vCPUs,
// firmware and guest OS, its disks and CD drives in the order of the descriptor's Items (the first disk boots),
// its NICs, and in words what it asks that Hangar does not model. Nothing here trusts the file: every number is
// checked, every file reference must be a plain member name, and what cannot be honoured is refused, naming it.
import { attributeKey, childNamed, childrenNamed, parseXml, type XmlElement, XmlError } from "./xml.ts";

export class OvfError extends Error {}

const OVF_NS = ["http://schemas.dmtf.org/ovf/envelope/1", "http://schemas.dmtf.org/ovf/envelope/2", "http://www.vmware.com/schema/ovf/1/envelope"];
const VMW_NS = "http://www.vmware.com/schema/ovf";
const VBOX_NS = "http://www.virtualbox.org/ovf/machine";

/** What a descriptor may be: a vApp with long EULAs is some 500 KiB; 4 MiB parses in ~120 ms, in slices. */
export const OVF_LIMITS = { maxBytes: 4 * 1024 * 1024, maxElements: 100_000, maxDepth: 64, maxAttributes: 64 };
/** Drives and NICs one VM may have (the toolstack's VBD and VIF device numbers). */
export const MAX_DRIVES = 255;
export const MAX_NICS = 64;
const MAX_VCPUS = 512;
const MAX_MEMORY = 16 * 1024 ** 4;
/** 2040 GiB: what xapi's VHD-based SRs take, and far past any disk an OVA carries in practice. */
const MAX_CAPACITY = 64 * 1024 ** 4;

export interface OvfFile {
  id: string;
  /** A member name of the package (no directory, no `..`). */
  href: string;
  size: number | null;
}

export interface OvfDisk {
  id: string;
  /** The file of its data; null for a blank disk (created empty). */
  file: OvfFile | null;
  capacity: number;
  /** The `ovf:format` URI (only a hint: the format is read from the bytes). */
  format: string;
}

export type OvfDrive = { kind: "disk"; name: string; disk: OvfDisk } | { kind: "cd"; name: string };

export interface OvfNic {
  name: string;
  network: string;
  /** The MAC it asks for, if any (lower case, colons). */
  mac: string | null;
  model: string;
}

export interface OvfPackage {
  /** 1 for OVF 1.x, 2 for 2.x, 0 for VMware's 0.9. */
  version: number;
  name: string;
  description: string;
  memory: number;
  vcpus: number;
  firmware: "bios" | "uefi";
  secureBoot: boolean;
  os: { id: number | null; type: string; description: string };
  /** `VirtualSystemType`, e.g. vmx-13 or virtualbox-2.2. */
  hardware: string;
  files: OvfFile[];
  /** Disks and CD drives in the descriptor's order: the VM's devices 0, 1, … (the first disk boots). */
  drives: OvfDrive[];
  nics: OvfNic[];
  /** What the descriptor asks that the VM will not have, in words. */
  unsupported: string[];
}

/** The VM a descriptor describes; an OvfError says in words why a descriptor cannot be imported. */
export async function readOvf(bytes: Buffer, signal?: AbortSignal): Promise<OvfPackage> {
  let root: XmlElement;
  try {
    root = await parseXml(bytes, OVF_LIMITS, signal);
  } catch (error) {
    if (error instanceof XmlError) throw new OvfError(`not a readable XML document: ${error.message}`);
    throw error;
  }
  if (root.local !== "Envelope" || !OVF_NS.includes(root.ns)) throw new OvfError(`not an OVF descriptor: its root element is <${root.local}>${root.ns === "" ? "" : ` in ${root.ns}`}, not an OVF Envelope`);
  return describe(root);
}

/** An `ovf:` attribute: prefixed in the envelope's namespace, or (as some writers do) unprefixed. */
function attr(element: XmlElement | undefined, name: string): string | undefined {
  if (element === undefined) return undefined;
  for (const ns of [element.ns, ...OVF_NS]) {
    const value = element.attributes.get(attributeKey(ns, name));
    if (value !== undefined) return value;
  }
  return element.attributes.get(name);
}

function sections(parent: XmlElement | undefined, local: string): XmlElement[] {
  return childrenNamed(parent, OVF_NS, local);
}

function section(parent: XmlElement | undefined, local: string): XmlElement | undefined {
  return childNamed(parent, OVF_NS, local);
}

/** An Item's property (rasd:, epasd:, sasd: all alike): its text, or undefined. */
function property(item: XmlElement, local: string): string | undefined {
  return item.children.find((child) => child.local === local)?.text;
}

function describe(envelope: XmlElement): OvfPackage {
  const version = envelope.ns.endsWith("/2") ? 2 : envelope.ns.endsWith("/1") ? 1 : 0;
  const files = readFiles(envelope);
  const disks = readDisks(envelope, files);
  if (section(envelope, "VirtualSystemCollection") !== undefined) throw new OvfError("the descriptor is a vApp of several virtual systems (VirtualSystemCollection): import each VM's own OVF");
  const system = section(envelope, "VirtualSystem");
  if (system === undefined) throw new OvfError("the descriptor describes no virtual system (no VirtualSystem element)");
  const hardware = section(system, "VirtualHardwareSection");
  if (hardware === undefined) throw new OvfError("the virtual system has no VirtualHardwareSection");
  const unsupported: string[] = [];
  const items = chosenItems(envelope, hardware);
  const devices = readItems(items, disks, unsupported);
  for (const disk of disks.values()) {
    if (!devices.usedDisks.has(disk.id)) unsupported.push(`disk ${disk.id}${disk.file === null ? "" : ` (${disk.file.href})`}: no drive of the VM holds it, so it is not imported`);
  }
  const os = section(system, "OperatingSystemSection");
  const osId = attr(os, "id");
  const firmware = readFirmware(hardware, system);
  const name = (section(system, "Name")?.text || attr(system, "id") || "").trim();
  return {
    version,
    name: name === "" ? "Imported VM" : name.slice(0, 255),
    description: section(section(system, "AnnotationSection"), "Annotation")?.text ?? "",
    memory: devices.memory ?? 1024 ** 3,
    vcpus: devices.vcpus ?? 1,
    firmware: firmware.uefi ? "uefi" : "bios",
    secureBoot: firmware.secureBoot,
    os: {
      id: osId !== undefined && /^\d{1,5}$/.test(osId) ? Number(osId) : null,
      type: os?.attributes.get(attributeKey(VMW_NS, "osType")) ?? os?.children.find((c) => c.local === "OSType" && c.ns === VBOX_NS)?.text ?? "",
      description: section(os, "Description")?.text ?? "",
    },
    hardware: section(hardware, "System")?.children.find((c) => c.local === "VirtualSystemType")?.text ?? "",
    files: [...files.values()],
    drives: devices.drives,
    nics: devices.nics,
    unsupported,
  };
}

/** A file reference must name a member of the package: one plain name, nothing to resolve or fetch. */
function memberHref(href: string | undefined, id: string): string {
  if (href === undefined || href.trim() === "") throw new OvfError(`file ${id} has no ovf:href`);
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) throw new OvfError(`file ${id} is at ${JSON.stringify(href)}: only files inside the package are read, nothing is fetched`);
  if (href.startsWith("/") || href.split(/[/\\]/).includes("..")) throw new OvfError(`file ${id} is at ${JSON.stringify(href)}: a path out of the package`);
  return href.replace(/^(?:\.\/)+/, "");
}

function readFiles(envelope: XmlElement): Map<string, OvfFile> {
  const files = new Map<string, OvfFile>();
  for (const file of sections(section(envelope, "References"), "File")) {
    const id = attr(file, "id") ?? "";
    if (id === "") throw new OvfError("a File in References has no ovf:id");
    if (files.has(id)) throw new OvfError(`two files have the id ${JSON.stringify(id)}`);
    const compression = attr(file, "compression");
    if (compression !== undefined && compression !== "identity") throw new OvfError(`file ${id} is stored ${compression}-compressed (ovf:compression), which this import does not read: export the OVA without compression`);
    if (attr(file, "chunkSize") !== undefined) throw new OvfError(`file ${id} is split in chunks (ovf:chunkSize), which this import does not read: export the OVA without chunking`);
    const size = attr(file, "size");
    files.set(id, { id, href: memberHref(attr(file, "href"), id), size: size !== undefined && /^\d{1,16}$/.test(size.trim()) ? Number(size) : null });
  }
  return files;
}

/** Bytes per unit of a DSP0004 unit string (`byte * 2^20`, `MegaBytes`, `KB`, …); undefined for one not known. */
export function unitBytes(units: string | undefined): number | undefined {
  if (units === undefined || units.trim() === "") return undefined;
  const text = units.trim();
  const programmatic = /^bytes?\s*(?:\*\s*(\d+)\s*\^\s*(-?\d+))?$/i.exec(text);
  if (programmatic !== null) {
    if (programmatic[1] === undefined) return 1;
    const value = Number(programmatic[1]) ** Number(programmatic[2]);
    return Number.isSafeInteger(value) && value >= 1 ? value : undefined;
  }
  const names: Record<string, number> = { kb: 1024, kilobytes: 1024, kib: 1024, mb: 1024 ** 2, megabytes: 1024 ** 2, mib: 1024 ** 2, gb: 1024 ** 3, gigabytes: 1024 ** 3, gib: 1024 ** 3, tb: 1024 ** 4, terabytes: 1024 ** 4, tib: 1024 ** 4 };
  return names[text.toLowerCase()];
}

function quantity(text: string | undefined, units: string | undefined, defaultUnit: number, what: string): number {
  const multiplier = units === undefined || units.trim() === "" ? defaultUnit : unitBytes(units);
  if (multiplier === undefined) throw new OvfError(`${what}: the unit ${JSON.stringify(units)} is not one this import knows`);
  if (text === undefined || !/^\s*\d{1,20}\s*$/.test(text)) throw new OvfError(`${what}: ${JSON.stringify(text ?? "")} is not a whole number${text?.includes("${") === true ? " (a property reference, which this import does not resolve)" : ""}`);
  const value = Number(text) * multiplier;
  if (!Number.isSafeInteger(value)) throw new OvfError(`${what}: ${text} × ${multiplier} is too large`);
  return value;
}

function readDisks(envelope: XmlElement, files: Map<string, OvfFile>): Map<string, OvfDisk> {
  const disks = new Map<string, OvfDisk>();
  for (const disk of sections(section(envelope, "DiskSection"), "Disk")) {
    const id = attr(disk, "diskId") ?? "";
    if (id === "") throw new OvfError("a Disk in DiskSection has no ovf:diskId");
    if (disks.has(id)) throw new OvfError(`two disks have the id ${JSON.stringify(id)}`);
    if (attr(disk, "parentRef") !== undefined) throw new OvfError(`disk ${id} is a delta of another (ovf:parentRef), which this import does not read`);
    const capacity = quantity(attr(disk, "capacity"), attr(disk, "capacityAllocationUnits"), 1, `disk ${id}'s capacity`);
    if (capacity <= 0 || capacity > MAX_CAPACITY) throw new OvfError(`disk ${id}'s capacity, ${capacity} bytes, is not one a disk can have`);
    const fileRef = attr(disk, "fileRef");
    const file = fileRef === undefined || fileRef === "" ? null : files.get(fileRef);
    if (file === undefined) throw new OvfError(`disk ${id} names the file ${JSON.stringify(fileRef)}, which References does not list`);
    disks.set(id, { id, file, capacity: Math.ceil(capacity / 512) * 512, format: attr(disk, "format") ?? "" });
  }
  return disks;
}

/** The Items of the default configuration (DeploymentOptionSection), or of none. */
function chosenItems(envelope: XmlElement, hardware: XmlElement): XmlElement[] {
  const configurations = sections(section(envelope, "DeploymentOptionSection"), "Configuration");
  const chosen = attr(configurations.find((c) => attr(c, "default") === "true") ?? configurations[0], "id");
  return hardware.children.filter((child) => {
    if (!["Item", "EthernetPortItem", "StorageItem"].includes(child.local)) return false;
    const only = attr(child, "configuration");
    return only === undefined || (chosen !== undefined && only.split(/\s+/).includes(chosen));
  });
}

const NOT_MODELLED: Record<string, string> = {
  "1": "other device",
  "14": "floppy drive",
  "21": "serial port",
  "22": "parallel port",
  "23": "USB controller",
  "24": "graphics card",
  "35": "sound card",
};
const CONTROLLERS = new Set(["5", "6", "7", "8", "9", "20"]);

interface Devices {
  memory: number | undefined;
  vcpus: number | undefined;
  drives: OvfDrive[];
  nics: OvfNic[];
  usedDisks: Set<string>;
}

/** The disk id an Item's HostResource names: `ovf:/disk/X`, `ovf://disk/X` or `/disk/X`; undefined for another resource. */
function hostDisk(item: XmlElement): string | undefined {
  const resource = property(item, "HostResource");
  return resource === undefined ? undefined : /^(?:ovf:)?\/\/?disk\/(.+)$/.exec(resource.trim())?.[1];
}

function readItems(items: XmlElement[], disks: Map<string, OvfDisk>, unsupported: string[]): Devices {
  const devices: Devices = { memory: undefined, vcpus: undefined, drives: [], nics: [], usedDisks: new Set() };
  const slots = new Map<string, string>();
  const controllerIds = new Set(items.filter((item) => CONTROLLERS.has(property(item, "ResourceType")?.trim() ?? "")).map((item) => property(item, "InstanceID") ?? property(item, "InstanceId") ?? ""));
  for (const item of items) {
    const type = property(item, "ResourceType")?.trim() ?? "";
    const name = property(item, "ElementName") || property(item, "Caption") || `item ${property(item, "InstanceID") ?? "?"}`;
    const subtype = property(item, "ResourceSubType");
    const labelled = `${name}${subtype === undefined || subtype === "" ? "" : ` (${subtype})`}`;
    switch (type) {
      case "3": {
        const count = quantity(property(item, "VirtualQuantity"), undefined, 1, "the vCPU count");
        if (count < 1 || count > MAX_VCPUS) throw new OvfError(`the VM asks for ${count} vCPUs: 1 to ${MAX_VCPUS} are possible`);
        devices.vcpus = count;
        const cores = item.children.find((c) => c.local === "CoresPerSocket")?.text;
        if (cores !== undefined && cores !== "" && cores !== "1") unsupported.push(`${cores} cores per socket (the VM gets ${count} vCPUs, one core each)`);
        break;
      }
      case "4": {
        const bytes = quantity(property(item, "VirtualQuantity"), property(item, "AllocationUnits"), 1024 ** 2, "the memory size");
        if (bytes < 16 * 1024 ** 2 || bytes > MAX_MEMORY) throw new OvfError(`the VM asks for ${bytes} bytes of memory: 16 MiB to 16 TiB are possible`);
        devices.memory = bytes;
        break;
      }
      case "10": {
        if (devices.nics.length >= MAX_NICS) throw new OvfError(`the VM has more than ${MAX_NICS} network adapters`);
        const mac = property(item, "Address")?.trim().toLowerCase().replaceAll("-", ":") ?? "";
        devices.nics.push({ name, network: property(item, "Connection") ?? "", mac: /^[0-9a-f]{2}(?::[0-9a-f]{2}){5}$/.test(mac) ? mac : null, model: subtype ?? "" });
        break;
      }
      case "15":
      case "16":
        if (devices.drives.length >= MAX_DRIVES) throw new OvfError(`the VM has more than ${MAX_DRIVES} drives`);
        devices.drives.push({ kind: "cd", name });
        if (property(item, "HostResource")) unsupported.push(`${name}: the image it holds (${property(item, "HostResource")}) is not imported; the drive is left empty`);
        break;
      case "17": {
        const id = hostDisk(item);
        if (id === undefined) {
          unsupported.push(`${name}: a disk drive without a disk of the package (${property(item, "HostResource") ?? "no HostResource"})`);
          break;
        }
        const disk = disks.get(id);
        if (disk === undefined) throw new OvfError(`${name} holds the disk ${JSON.stringify(id)}, which DiskSection does not describe`);
        if (devices.usedDisks.has(id)) throw new OvfError(`two drives hold the disk ${JSON.stringify(id)}`);
        const parent = property(item, "Parent");
        const address = property(item, "AddressOnParent");
        if (parent !== undefined && address !== undefined) {
          const slot = `${parent}/${address}`;
          const other = slots.get(slot);
          if (other !== undefined) throw new OvfError(`two disks claim slot ${address} of controller ${parent}: ${other} and ${id}`);
          slots.set(slot, id);
          if (!controllerIds.has(parent)) unsupported.push(`${name}: its controller ${parent} is not described; the disk is attached all the same`);
        }
        if (devices.drives.length >= MAX_DRIVES) throw new OvfError(`the VM has more than ${MAX_DRIVES} drives`);
        devices.usedDisks.add(id);
        devices.drives.push({ kind: "disk", name, disk });
        break;
      }
      default:
        if (CONTROLLERS.has(type)) break;
        unsupported.push(`${NOT_MODELLED[type] ?? `device of resource type ${type || "(none)"}`}: ${labelled}`);
    }
  }
  return devices;
}

/** UEFI from VMware's `vmw:Config firmware=efi`, or VirtualBox's `<Firmware type="EFI">` in its machine section. */
function readFirmware(hardware: XmlElement, system: XmlElement): { uefi: boolean; secureBoot: boolean } {
  const config = new Map<string, string>();
  for (const child of hardware.children) {
    if (child.ns !== VMW_NS || (child.local !== "Config" && child.local !== "ExtraConfig")) continue;
    const key = child.attributes.get(attributeKey(VMW_NS, "key"));
    const value = child.attributes.get(attributeKey(VMW_NS, "value"));
    if (key !== undefined && value !== undefined) config.set(key, value.toLowerCase());
  }
  const stack = system.children.filter((c) => c.ns === VBOX_NS);
  let vboxEfi = false;
  // Bounded: the tree is at most OVF_LIMITS.maxElements.
  while (stack.length > 0 && !vboxEfi) {
    const element = stack.pop()!;
    if (element.local === "Firmware" && /^efi/i.test(element.attributes.get("type") ?? "")) vboxEfi = true;
    stack.push(...element.children);
  }
  return {
    uefi: config.get("firmware") === "efi" || vboxEfi,
    secureBoot: config.get("uefi.secureBoot.enabled") === "true" || config.get("bootOptions.efiSecureBootEnabled") === "true",
  };
}
