// Fuzz target (issue 24): the OVF descriptor and the manifest as the importer reads them, on generated
// packages: descriptors written by Hangar's writer (VMware's dialect) and VirtualBox's, with Items of every
// resource type, odd units, references that dangle or repeat, hrefs that try to leave the package, quantities
// out of range; now and then the XML edited as text (entities, DOCTYPEs, deep nesting, bytes that are no UTF-8).
// Each case: a package whose facts are within bounds, or OvfError; a manifest's entries or ManifestError.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { editedText, fuzz, type FuzzBudget } from "../fuzz-testing.ts";
import { MAX_DRIVES, MAX_NICS, OvfError, readOvf } from "./descriptor.ts";
import { writeOvf, type OvfDriveSpec } from "./descriptor-writer.ts";
import { ManifestError, parseManifest } from "./manifest.ts";
import { virtualBoxOvf } from "./testing.ts";

const BUDGET: FuzzBudget = { slice: 150, full: 5000, fullSeconds: 20, caseMs: 5000 };

const name = fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom("../etc/passwd", "/abs.vmdk", "http://x/y.vmdk", "a&b<c>", "disk.vmdk", ""));
const quantity = fc.oneof(fc.nat({ max: 1 << 30 }), fc.constantFrom(0, -1, 1e21, Number.MAX_SAFE_INTEGER));
const drive: fc.Arbitrary<OvfDriveSpec> = fc.oneof(
  fc.record({ kind: fc.constant("disk" as const), href: name, capacity: quantity, name }),
  fc.record({ kind: fc.constant("cd" as const), name }),
);
const written = fc
  .record({
    name,
    description: fc.string({ maxLength: 40 }),
    memory: quantity,
    vcpus: fc.oneof(fc.nat({ max: 600 }), fc.constant(-3)),
    firmware: fc.constantFrom("bios" as const, "uefi" as const),
    secureBoot: fc.boolean(),
    os: fc.record({ id: fc.oneof(fc.constant(null), fc.nat({ max: 70_000 })), type: name, description: name }),
    drives: fc.array(drive, { maxLength: 6 }),
    nics: fc.array(fc.record({ network: name, mac: fc.constantFrom("aa:bb:cc:dd:ee:ff", "zz", "") }), { maxLength: 3 }),
  })
  .map((spec) => writeOvf(spec));
const virtualBox = fc.record({ disk: name, capacity: quantity }).map((o) => virtualBoxOvf({ disk: o.disk.replace(/[<&"]/g, ""), capacity: o.capacity }));
const fragments = fc.constantFrom(
  '<!DOCTYPE Envelope [<!ENTITY a "aaaaaaaaaa">]>',
  "&a;",
  "&#0;",
  "<![CDATA[<Item>]]>",
  "<Item><rasd:ResourceType>17</rasd:ResourceType><rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource></Item>",
  "<Item><rasd:ResourceType>23</rasd:ResourceType></Item>",
  '<vmw:Config vmw:key="firmware" vmw:value="efi"/>',
  '<VirtualSystemCollection ovf:id="x">',
  '<File ovf:id="file1" ovf:href="../x"/>',
  '<Disk ovf:diskId="vmdisk1" ovf:capacity="${x}"/>',
  "<a>".repeat(70),
  "\uFFFE",
  "</Envelope>",
  '"',
  "ovf:",
);
const descriptor = fc.oneof({ weight: 2, arbitrary: fc.oneof(written, virtualBox) }, { weight: 3, arbitrary: editedText(fc.oneof(written, virtualBox), fragments) });

test("fuzz: OVF descriptors are read into bounded facts or refused with OvfError", async (t) => {
  await fuzz(t, "ovf descriptor", BUDGET, fc.tuple(descriptor, fc.boolean()), async ([xml, latin1]) => {
    let ovf;
    try {
      ovf = await readOvf(Buffer.from(xml, latin1 ? "latin1" : "utf8"));
    } catch (error) {
      if (error instanceof OvfError) return;
      throw error;
    }
    assert.ok(ovf.vcpus >= 1 && ovf.vcpus <= 512 && Number.isSafeInteger(ovf.vcpus));
    assert.ok(ovf.memory >= 16 * 1024 ** 2 && Number.isSafeInteger(ovf.memory));
    assert.ok(ovf.drives.length <= MAX_DRIVES && ovf.nics.length <= MAX_NICS);
    assert.ok(ovf.name.length > 0 && ovf.name.length <= 255);
    const disks = new Set<string>();
    for (const d of ovf.drives) {
      if (d.kind !== "disk") continue;
      assert.ok(d.disk.capacity > 0 && d.disk.capacity % 512 === 0 && Number.isSafeInteger(d.disk.capacity));
      assert.ok(!disks.has(d.disk.id), "a disk in two drives");
      disks.add(d.disk.id);
      if (d.disk.file !== null) assert.ok(!d.disk.file.href.startsWith("/") && !d.disk.file.href.split(/[/\\]/).includes("..") && !/^[a-z][a-z0-9+.-]*:/i.test(d.disk.file.href), d.disk.file.href);
    }
  });
});

const line = fc.oneof(
  fc.record({ alg: fc.constantFrom("SHA1", "SHA256", "SHA512", "sha256", "MD5", ""), file: name, hex: fc.stringMatching(/^[0-9a-fA-F]{0,130}$/), spaced: fc.boolean() }).map(({ alg, file, hex, spaced }) => (spaced ? `${alg} (${file}) = ${hex}` : `${alg}(${file})= ${hex}`)),
  fc.string({ maxLength: 60 }),
);

test("fuzz: manifests are read into entries of known algorithms and digest lengths, or refused with ManifestError", async (t) => {
  await fuzz(t, "ovf manifest", BUDGET, fc.tuple(fc.array(line, { maxLength: 8 }), fc.constantFrom("\n", "\r\n")), ([lines, eol]) => {
    let entries;
    try {
      entries = parseManifest(Buffer.from(lines.join(eol)));
    } catch (error) {
      if (error instanceof ManifestError) return;
      throw error;
    }
    for (const entry of entries) assert.equal(entry.digest.length, { sha1: 40, sha256: 64, sha512: 128 }[entry.algorithm]);
  });
});
