// The OVF descriptor read as VirtualBox and VMware (Hangar's own writer, in VMware's dialect) write it, and
// refused in words when it is no descriptor, asks for what cannot be done, or tries to reach outside.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { readOvf } from "./descriptor.ts";
import { writeOvf } from "./descriptor-writer.ts";
import { virtualBoxOvf } from "./testing.ts";
import { longestStep } from "../event-loop-testing.ts";

const GiB = 1024 ** 3;

describe("readOvf", () => {
  test("reads back what writeOvf writes: name, memory, vCPUs, UEFI, OS, drives in order, NICs", async () => {
    const spec = {
      name: "web <01> & co",
      description: "Exported by Hangar\nsecond line",
      memory: 3 * GiB,
      vcpus: 4,
      firmware: "uefi" as const,
      secureBoot: true,
      os: { id: 96, type: "debian10_64Guest", description: "Debian 10 (64-bit)" },
      drives: [
        { kind: "disk" as const, href: "web-disk1.vmdk", capacity: 10 * GiB, name: "Hard Disk 1" },
        { kind: "cd" as const, name: "CD/DVD drive 1" },
        { kind: "disk" as const, href: "web-disk2.vmdk", capacity: 2 * GiB + 512, name: "Hard Disk 2" },
      ],
      nics: [
        { network: "Pool-wide network", mac: "aa:bb:cc:00:11:22" },
        { network: "Storage", mac: "aa:bb:cc:00:11:23" },
      ],
    };
    const ovf = await readOvf(Buffer.from(writeOvf(spec)));
    assert.equal(ovf.version, 1);
    assert.equal(ovf.name, spec.name);
    assert.equal(ovf.description, spec.description);
    assert.equal(ovf.memory, 3 * GiB);
    assert.equal(ovf.vcpus, 4);
    assert.equal(ovf.firmware, "uefi");
    assert.equal(ovf.secureBoot, true);
    assert.deepEqual(ovf.os, { id: 96, type: "debian10_64Guest", description: "Debian 10 (64-bit)" });
    assert.deepEqual(
      ovf.drives.map((d) => (d.kind === "cd" ? "cd" : `${d.disk.file?.href} ${d.disk.capacity}`)),
      [`web-disk1.vmdk ${10 * GiB}`, "cd", `web-disk2.vmdk ${2 * GiB + 512}`],
    );
    assert.deepEqual(ovf.nics.map((n) => [n.network, n.mac]), [["Pool-wide network", "aa:bb:cc:00:11:22"], ["Storage", "aa:bb:cc:00:11:23"]]);
    assert.deepEqual(ovf.unsupported, []);
  });

  test("reads VirtualBox's dialect: MegaBytes, SATA, /disk/ references, EFI in vbox:Machine; lists USB and sound", async () => {
    const ovf = await readOvf(Buffer.from(virtualBoxOvf({ disk: "debian-disk001.vmdk", capacity: 8 * GiB })));
    assert.equal(ovf.name, "debian & friends");
    assert.equal(ovf.memory, 2048 * 1024 ** 2);
    assert.equal(ovf.vcpus, 2);
    assert.equal(ovf.firmware, "uefi");
    assert.deepEqual(ovf.os, { id: 96, type: "Debian_64", description: "Debian_64" });
    assert.equal(ovf.hardware, "virtualbox-2.2");
    // The descriptor's order: the SATA disk's Item comes before the IDE CD's.
    assert.deepEqual(ovf.drives.map((d) => d.kind), ["disk", "cd"]);
    assert.deepEqual(ovf.nics, [{ name: "Ethernet adapter on 'NAT'", network: "NAT", mac: null, model: "E1000" }]);
    assert.deepEqual(ovf.unsupported, ["USB controller: usb", "sound card: sound (ensoniq1371)"]);
  });

  test("takes the default configuration's Items, VMware's 0.9 namespace, a prefixed envelope and capacity units", async () => {
    const xml = `<ovf:Envelope xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:r="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData">
      <ovf:References><ovf:File ovf:id="f" ovf:href="./d.qcow2" ovf:size="123"/></ovf:References>
      <ovf:DiskSection><ovf:Info/><ovf:Disk ovf:diskId="d" ovf:fileRef="f" ovf:capacity="20" ovf:capacityAllocationUnits="byte * 2^30"/></ovf:DiskSection>
      <ovf:DeploymentOptionSection><ovf:Configuration ovf:id="small"/><ovf:Configuration ovf:id="large" ovf:default="true"/></ovf:DeploymentOptionSection>
      <ovf:VirtualSystem ovf:id="appliance"><ovf:Info/>
        <ovf:VirtualHardwareSection><ovf:Info/>
          <ovf:Item ovf:configuration="small"><r:ResourceType>3</r:ResourceType><r:VirtualQuantity>1</r:VirtualQuantity></ovf:Item>
          <ovf:Item ovf:configuration="large"><r:ResourceType>3</r:ResourceType><r:VirtualQuantity>8</r:VirtualQuantity></ovf:Item>
          <ovf:Item><r:ResourceType>4</r:ResourceType><r:AllocationUnits>byte * 2^30</r:AllocationUnits><r:VirtualQuantity>16</r:VirtualQuantity></ovf:Item>
          <ovf:Item><r:ResourceType>17</r:ResourceType><r:HostResource>ovf:/disk/d</r:HostResource></ovf:Item>
        </ovf:VirtualHardwareSection>
      </ovf:VirtualSystem></ovf:Envelope>`;
    const ovf = await readOvf(Buffer.from(xml));
    assert.equal(ovf.name, "appliance");
    assert.equal(ovf.vcpus, 8);
    assert.equal(ovf.memory, 16 * GiB);
    assert.equal(ovf.firmware, "bios");
    assert.deepEqual(ovf.files, [{ id: "f", href: "d.qcow2", size: 123 }]);
    assert.equal(ovf.drives[0]?.kind === "disk" && ovf.drives[0].disk.capacity, 20 * GiB);
  });

  const envelope = (body: string, references = "") =>
    `<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData"><References>${references}</References>${body}</Envelope>`;
  const system = (items: string) => `<VirtualSystem ovf:id="vm"><Info/><VirtualHardwareSection><Info/>${items}</VirtualHardwareSection></VirtualSystem>`;
  const disk = (id: string, file = "f1", capacity = "1073741824") => `<Disk ovf:diskId="${id}" ovf:fileRef="${file}" ovf:capacity="${capacity}"/>`;
  const drive = (id: string, slot = "0", parent = "3") => `<Item><rasd:AddressOnParent>${slot}</rasd:AddressOnParent><rasd:HostResource>ovf:/disk/${id}</rasd:HostResource><rasd:InstanceID>9${id}</rasd:InstanceID><rasd:Parent>${parent}</rasd:Parent><rasd:ResourceType>17</rasd:ResourceType></Item>`;
  const file = (id: string, href: string) => `<File ovf:id="${id}" ovf:href="${href}"/>`;

  const refusals: Array<[string, string, RegExp]> = [
    ["not XML", "this is no XML at all", /not a readable XML document/],
    ["an XVA's ova.xml", "<value><struct></struct></value>", /not an OVF descriptor: its root element is <value>/],
    ["a DOCTYPE with an entity", `<!DOCTYPE Envelope [<!ENTITY x "boom">]>${envelope("<x>&x;</x>")}`, /DOCTYPE/],
    ["an external entity", `<!DOCTYPE Envelope [<!ENTITY x SYSTEM "file:///etc/passwd">]>${envelope("<x>&x;</x>")}`, /DOCTYPE/],
    ["an undefined entity", envelope("<x>&nbsp;</x>"), /not a readable XML document/],
    ["no virtual system", envelope(""), /no virtual system/],
    ["a vApp", envelope("<VirtualSystemCollection/>"), /vApp of several/],
    ["a file out of the package", envelope(`<DiskSection>${disk("d")}</DiskSection>${system(drive("d"))}`, file("f1", "../../etc/shadow")), /a path out of the package/],
    ["an absolute file", envelope(`<DiskSection>${disk("d")}</DiskSection>${system(drive("d"))}`, file("f1", "/etc/shadow")), /a path out of the package/],
    ["a file at a URL", envelope(`<DiskSection>${disk("d")}</DiskSection>${system(drive("d"))}`, file("f1", "http://example.com/d.vmdk")), /nothing is fetched/],
    ["a disk of a file not listed", envelope(`<DiskSection>${disk("d", "nope")}</DiskSection>${system(drive("d"))}`, file("f1", "d.vmdk")), /names the file "nope"/],
    ["a drive of a disk not described", envelope(`<DiskSection>${disk("d")}</DiskSection>${system(drive("e"))}`, file("f1", "d.vmdk")), /holds the disk "e"/],
    ["two disks in one slot", envelope(`<DiskSection>${disk("d")}${disk("e", "f2")}</DiskSection>${system(drive("d") + drive("e"))}`, file("f1", "d.vmdk") + file("f2", "e.vmdk")), /two disks claim slot 0 of controller 3: d and e/],
    ["one disk in two drives", envelope(`<DiskSection>${disk("d")}</DiskSection>${system(drive("d") + drive("d", "1"))}`, file("f1", "d.vmdk")), /two drives hold the disk "d"/],
    ["a capacity property", envelope(`<DiskSection>${disk("d", "f1", "${size}")}</DiskSection>${system(drive("d"))}`, file("f1", "d.vmdk")), /property reference/],
    ["a capacity unit not known", envelope(`<DiskSection><Disk ovf:diskId="d" ovf:fileRef="f1" ovf:capacity="1" ovf:capacityAllocationUnits="furlongs"/></DiskSection>${system(drive("d"))}`, file("f1", "d.vmdk")), /the unit "furlongs"/],
    ["a compressed file", envelope("", `<File ovf:id="f1" ovf:href="d.vmdk" ovf:compression="gzip"/>`), /gzip-compressed/],
    ["a chunked file", envelope("", `<File ovf:id="f1" ovf:href="d.vmdk" ovf:chunkSize="2000000000"/>`), /split in chunks/],
    ["10,000 vCPUs", envelope(system("<Item><rasd:ResourceType>3</rasd:ResourceType><rasd:VirtualQuantity>10000</rasd:VirtualQuantity></Item>")), /10000 vCPUs/],
    ["elements nested 100 deep", envelope(`${"<a>".repeat(100)}${"</a>".repeat(100)}`), /nested more than 64 deep/],
  ];
  for (const [what, xml, reason] of refusals) {
    test(`refuses ${what}`, async () => {
      await assert.rejects(readOvf(Buffer.from(xml)), reason);
    });
  }

  test("refuses a descriptor over 4 MiB before parsing it, and parses 4 MiB in slices (no step near 50 ms)", async () => {
    await assert.rejects(readOvf(Buffer.alloc(4 * 1024 * 1024 + 1, 0x20)), /more than the 4194304/);
    const eula = `<EulaSection><Info/><License>${"All rights reserved; no warranty. ".repeat(110_000)}</License></EulaSection>`;
    const xml = Buffer.from(envelope(`${eula}${system("")}`));
    assert.ok(xml.length < 4 * 1024 * 1024 && xml.length > 3.5 * 1024 * 1024);
    const { longestMs } = await longestStep(() => readOvf(xml));
    assert.ok(longestMs < 50, `the event loop worked ${longestMs.toFixed(1)} ms without a break`);
  });
});
