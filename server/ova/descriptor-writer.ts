// An OVF 1.0 descriptor for a VM, in the dialect every importer reads (docs/research/ova-ovf.md §4): the OVF 1
// namespace (virt-v2v and Proxmox know no other), memory in `byte * 2^20` (virt-v2v assumes MiB), capacities in
// bytes (VirtualBox ignores the units), `ovf:/disk/` references (all Proxmox accepts), rasd children in the
// schema's alphabetical order (VMware and VirtualBox require it), an LSI Logic SCSI controller and E1000 NICs
// (known to all), vmx-13 (ESXi 6.5 and later, which take SHA-256 manifests), UEFI as VMware's `firmware` Config.
import type { OvfPackage } from "./descriptor.ts";

export type OvfDriveSpec = { kind: "disk"; href: string; capacity: number; name: string } | { kind: "cd"; name: string };

export type OvfSpec = Pick<OvfPackage, "name" | "description" | "memory" | "vcpus" | "firmware" | "secureBoot" | "os"> & {
  drives: OvfDriveSpec[];
  nics: Array<{ network: string; mac: string }>;
};

const VMDK_STREAM = "http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized";

export function xmlEscape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" })[c]!).replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "");
}

/** An Item with its properties in the order given (callers give them alphabetically, as the schema wants). */
function item(properties: Array<[string, string | number]>, attributes = ""): string {
  const lines = properties.map(([name, value]) => `        <rasd:${name}>${xmlEscape(String(value))}</rasd:${name}>`);
  return `      <Item${attributes}>\n${lines.join("\n")}\n      </Item>`;
}

export function writeOvf(spec: OvfSpec): string {
  const disks = spec.drives.flatMap((drive, index) => (drive.kind === "disk" ? [{ ...drive, id: `vmdisk${index + 1}`, file: `file${index + 1}` }] : []));
  const networks = [...new Set(spec.nics.map((nic) => nic.network))];
  const items: string[] = [];
  let instance = 1;
  items.push(item([["AllocationUnits", "hertz * 10^6"], ["Description", "Number of Virtual CPUs"], ["ElementName", `${spec.vcpus} virtual CPU(s)`], ["InstanceID", instance++], ["ResourceType", 3], ["VirtualQuantity", spec.vcpus]]));
  items.push(item([["AllocationUnits", "byte * 2^20"], ["Description", "Memory Size"], ["ElementName", `${Math.ceil(spec.memory / 1024 ** 2)}MB of memory`], ["InstanceID", instance++], ["ResourceType", 4], ["VirtualQuantity", Math.ceil(spec.memory / 1024 ** 2)]]));
  const scsi = instance++;
  items.push(item([["Address", 0], ["Description", "SCSI Controller"], ["ElementName", "SCSI Controller 0"], ["InstanceID", scsi], ["ResourceSubType", "lsilogic"], ["ResourceType", 6]]));
  const ide = instance++;
  if (spec.drives.some((drive) => drive.kind === "cd")) items.push(item([["Address", 0], ["Description", "IDE Controller"], ["ElementName", "IDE Controller 0"], ["InstanceID", ide], ["ResourceType", 5]]));
  let scsiSlot = 0;
  let ideSlot = 0;
  for (const [index, drive] of spec.drives.entries()) {
    if (drive.kind === "cd") {
      items.push(item([["AddressOnParent", ideSlot++], ["AutomaticAllocation", "false"], ["ElementName", drive.name], ["InstanceID", instance++], ["Parent", ide], ["ResourceType", 15]]));
      continue;
    }
    // VMware has no SCSI target 7 (the controller's own).
    if (scsiSlot === 7) scsiSlot++;
    items.push(item([["AddressOnParent", scsiSlot++], ["ElementName", drive.name], ["HostResource", `ovf:/disk/vmdisk${index + 1}`], ["InstanceID", instance++], ["Parent", scsi], ["ResourceType", 17]]));
  }
  for (const [index, nic] of spec.nics.entries()) {
    items.push(item([["Address", nic.mac], ["AddressOnParent", 7 + index], ["AutomaticAllocation", "true"], ["Connection", nic.network], ["Description", `E1000 ethernet adapter on "${nic.network}"`], ["ElementName", `Network adapter ${index + 1}`], ["InstanceID", instance++], ["ResourceSubType", "E1000"], ["ResourceType", 10]]));
  }
  const os = spec.os;
  const vmwOs = os.type === "" ? "" : ` vmw:osType="${xmlEscape(os.type)}"`;
  return `<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData" xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData" xmlns:vmw="http://www.vmware.com/schema/ovf" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <References>
${disks.map((disk) => `    <File ovf:href="${xmlEscape(disk.href)}" ovf:id="${disk.file}"/>`).join("\n")}
  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
${disks.map((disk) => `    <Disk ovf:capacity="${disk.capacity}" ovf:capacityAllocationUnits="byte" ovf:diskId="${disk.id}" ovf:fileRef="${disk.file}" ovf:format="${VMDK_STREAM}"/>`).join("\n")}
  </DiskSection>
  <NetworkSection>
    <Info>The list of logical networks</Info>
${networks.map((network) => `    <Network ovf:name="${xmlEscape(network)}">\n      <Description>The ${xmlEscape(network)} network</Description>\n    </Network>`).join("\n")}
  </NetworkSection>
  <VirtualSystem ovf:id="${xmlEscape(spec.name)}">
    <Info>A virtual machine</Info>
    <Name>${xmlEscape(spec.name)}</Name>
    <OperatingSystemSection ovf:id="${os.id ?? 1}"${vmwOs}>
      <Info>The kind of installed guest operating system</Info>${os.description === "" ? "" : `\n      <Description>${xmlEscape(os.description)}</Description>`}
    </OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemIdentifier>${xmlEscape(spec.name)}</vssd:VirtualSystemIdentifier>
        <vssd:VirtualSystemType>vmx-13</vssd:VirtualSystemType>
      </System>
${items.join("\n")}
      <vmw:Config ovf:required="false" vmw:key="firmware" vmw:value="${spec.firmware === "uefi" ? "efi" : "bios"}"/>${spec.secureBoot ? `\n      <vmw:Config ovf:required="false" vmw:key="uefi.secureBoot.enabled" vmw:value="true"/>` : ""}
    </VirtualHardwareSection>
    <AnnotationSection ovf:required="false">
      <Info>A human-readable annotation</Info>
      <Annotation>${xmlEscape(spec.description)}</Annotation>
    </AnnotationSection>
  </VirtualSystem>
</Envelope>
`;
}
