// Fuzz target (issue 22): ova.xml as the importer takes it, parseOvaXml then checkVersion and planImport, on
// generated documents: objects of the classes an import reads (VM, VBD, VDI, SR, VIF, network, and others) whose
// references dangle, repeat, point at the wrong class or round in cycles, fields of the wrong type, big lists;
// now and then the XML edited as text. Each case: a plan, or OvaXmlError / IMPORT_INCOMPATIBLE_VERSION /
// IMPORT_ERROR; the plan only names disks of the file with valid sizes, and references come out resolved.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { editedText, fuzz, type FuzzBudget, xenString, xenValue } from "../../fuzz-testing.ts";
import { OvaXmlError, parseOvaXml, type OvaXml } from "../../xva/ova-xml.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { XenRecord, XenValue } from "../../xenapi/values.ts";
import { encodeXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { checkVersion, planImport } from "./ova-records.ts";

// A case's bound covers the largest documents the parser takes (200,000 values: some 3 s in its worker).
const BUDGET: FuzzBudget = { slice: 150, full: 20_000, fullSeconds: 20, caseMs: 10_000 };

/** Now and then not what the layout asks for: a document that parses is the interesting one. */
const rarely = <T extends XenValue>(expected: fc.Arbitrary<T>) => fc.oneof({ weight: 15, arbitrary: expected as fc.Arbitrary<XenValue> }, xenValue);

/** A field's value: one of the kind the importer expects, or anything. */
const either = <T extends XenValue>(expected: fc.Arbitrary<T>) => fc.oneof({ weight: 3, arbitrary: expected as fc.Arbitrary<XenValue> }, xenValue);

/** An id of a small file, hitting an object or just missing one. */
const id = fc.oneof({ weight: 6, arbitrary: fc.nat({ max: 24 }).map((n) => `Ref:${n}`) }, fc.constantFrom("OpaqueRef:NULL", "OpaqueRef:5e7b7b4e-0000-4000-8000-000000000000", "Ref:", ""), xenString);
/** A set of ids: a few, or a long run (many devices on one VM). */
const ids = fc.oneof({ weight: 4, arbitrary: fc.array(id, { maxLength: 6 }) }, fc.record({ count: fc.nat({ max: 5000 }), first: fc.nat({ max: 24 }) }).map(({ count, first }) => Array.from({ length: count }, (_, n) => `Ref:${(first + n) % 25}`)));

/** A reference field: null where the graph links it as an export would, now and then anything else. */
const link = fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, either(fc.oneof(id, ids)));

const size = fc.oneof({ weight: 4, arbitrary: fc.nat({ max: 64 * 1024 * 1024 }).map(String) }, fc.constantFrom("-1", "1e3", "0x10", " 12 ", "", "18446744073709551616", "9007199254740993"), fc.maxSafeNat());
const mostlyFalse = fc.oneof({ weight: 6, arbitrary: fc.constant(false) }, fc.constant(true));

/** The fields of each class that planImport and the record builders read, references aside. */
const FIELDS: Record<string, Record<string, fc.Arbitrary<XenValue>>> = {
  VM: { is_a_snapshot: either(mostlyFalse), is_control_domain: either(mostlyFalse), name_label: either(xenString), uuid: either(fc.uuid()) },
  VBD: { type: either(fc.constantFrom("Disk", "CD", "Floppy")), empty: either(mostlyFalse), userdevice: either(fc.nat({ max: 300 }).map(String)), mode: either(fc.constantFrom("RW", "RO")) },
  VDI: { virtual_size: either(size), type: either(fc.constantFrom("user", "system", "suspend", "iso")), sharable: either(fc.boolean()) },
  SR: { content_type: either(fc.constantFrom("user", "iso", "")) },
  VIF: { MAC: either(fc.constantFrom("aa:bb:cc:00:11:22", "", "zz")), device: either(fc.nat({ max: 20 }).map(String)) },
  network: { bridge: either(fc.constantFrom("xenbr0", "")), name_label: either(xenString) },
};
/** Fields the generated records carry always (otherwise most disks lack a size, and most files fail there). */
const REQUIRED: Record<string, string[]> = { VDI: ["virtual_size"], VBD: ["type"] };
const REFERENCES: Record<string, string[]> = { VM: ["VBDs", "VIFs"], VBD: ["VM", "VDI"], VDI: ["SR", "VBDs"], SR: ["VDIs"], VIF: ["VM", "network"], network: ["VIFs"] };

/** Some of a class's fields and a few others; its references as `linked` has them unless a generated one replaces it. */
const fieldsOf = (cls: string) =>
  fc.record({ known: fc.record(FIELDS[cls] ?? {}, { requiredKeys: REQUIRED[cls] ?? [] }), other: fc.dictionary(xenString, xenValue, { maxKeys: 2 }), links: fc.record(Object.fromEntries((REFERENCES[cls] ?? []).map((field) => [field, link]))) });
type Fields = { known: Record<string, XenValue>; other: Record<string, XenValue>; links: Record<string, XenValue | null> };

function record(fields: Fields, linked: Record<string, XenValue>): XenRecord {
  const out: XenRecord = { ...fields.other, ...fields.known };
  for (const [field, value] of Object.entries(linked)) out[field] = fields.links[field] ?? value;
  return out;
}

/**
 * A VM's graph as an export writes it (VM → VBDs → VDIs → SRs, VM → VIFs → networks, and back), each link
 * given by index and now and then replaced, plus objects of any class linking anywhere.
 */
const graph = fc.record({
  vm: fieldsOf("VM"),
  vbds: fc.array(fc.record({ fields: fieldsOf("VBD"), vdi: fc.nat() }), { maxLength: 6 }),
  vdis: fc.array(fc.record({ fields: fieldsOf("VDI"), sr: fc.nat() }), { maxLength: 4 }),
  srs: fc.array(fieldsOf("SR"), { minLength: 1, maxLength: 2 }),
  vifs: fc.array(fc.record({ fields: fieldsOf("VIF"), network: fc.nat() }), { maxLength: 3 }),
  networks: fc.array(fieldsOf("network"), { minLength: 1, maxLength: 2 }),
  strays: fc.array(fc.record({ cls: fc.constantFrom("VM", "VBD", "VDI", "SR", "VIF", "network", "host", "vm"), fields: fc.constantFrom("VM", "VBD", "VDI", "SR", "VIF", "network").chain(fieldsOf) }), { maxLength: 3 }),
  copies: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, fc.nat({ max: 300 })),
  /** Objects whose class, id or record is not of the layout's kind (index and what to put there). */
  broken: fc.oneof({ weight: 8, arbitrary: fc.constant([]) }, fc.array(fc.record({ object: fc.nat(), field: fc.constantFrom("class", "id", "snapshot"), value: fc.oneof(id, xenValue) }), { minLength: 1, maxLength: 2 })),
});

const objects = graph.map(({ vm, vbds, vdis, srs, vifs, networks, strays, copies, broken }): XenValue => {
  let next = 0;
  const idsOf = <T,>(list: T[]) => list.map(() => `Ref:${next++}`);
  const [vmId, vbdIds, vdiIds, srIds, vifIds, networkIds] = [`Ref:${next++}`, idsOf(vbds), idsOf(vdis), idsOf(srs), idsOf(vifs), idsOf(networks)];
  const pick = (list: string[], n: number) => (list.length === 0 ? "OpaqueRef:NULL" : list[n % list.length]!);
  const made: XenRecord[] = [
    { class: "VM", id: vmId, snapshot: record(vm, { VBDs: vbdIds, VIFs: vifIds }) },
    ...vbds.map((vbd, n) => ({ class: "VBD", id: vbdIds[n]!, snapshot: record(vbd.fields, { VM: vmId, VDI: pick(vdiIds, vbd.vdi) }) })),
    ...vdis.map((vdi, n) => ({ class: "VDI", id: vdiIds[n]!, snapshot: record(vdi.fields, { SR: pick(srIds, vdi.sr), VBDs: vbdIds.filter((_, v) => pick(vdiIds, vbds[v]!.vdi) === vdiIds[n]) }) })),
    ...srs.map((sr, n) => ({ class: "SR", id: srIds[n]!, snapshot: record(sr, { VDIs: vdiIds.filter((_, d) => pick(srIds, vdis[d]!.sr) === srIds[n]) }) })),
    ...vifs.map((vif, n) => ({ class: "VIF", id: vifIds[n]!, snapshot: record(vif.fields, { VM: vmId, network: pick(networkIds, vif.network) }) })),
    ...networks.map((network, n) => ({ class: "network", id: networkIds[n]!, snapshot: record(network, { VIFs: vifIds.filter((_, v) => pick(networkIds, vifs[v]!.network) === networkIds[n]) }) })),
    ...strays.map((stray) => ({ class: stray.cls, id: `Ref:${next++}`, snapshot: record(stray.fields, {}) })),
  ];
  // Many objects: the VM again under new ids, its devices shared (a big file costs what it costs, never more).
  for (let n = 0; n < copies; n++) made.push({ ...made[0]!, id: `Ref:${1000 + n}` });
  for (const { object, field, value } of broken) made[object % made.length]![field] = value;
  return made;
});

const validVersion = fc.record({ hostname: xenString, date: fc.constant("20261123T10:08:00Z"), product_version: fc.constant("8.2.1"), product_brand: xenString, build_number: xenString, xapi_major: fc.integer({ min: 0, max: 3 }), xapi_minor: fc.integer({ min: 0, max: 30 }), export_vsn: fc.integer({ min: 0, max: 3 }) });
const version = fc.oneof(
  { weight: 12, arbitrary: validVersion },
  // One field of a right version wrong or missing.
  validVersion.chain((valid) =>
    fc.record({ field: fc.constantFrom(...Object.keys(valid)), value: fc.option(xenValue) }).map(({ field, value }): XenValue => {
      const { [field]: _dropped, ...rest } = valid as XenRecord;
      return value === null ? rest : { ...rest, [field]: value };
    }),
  ),
  xenValue,
);

const document = fc.record({ version, objects: rarely(objects) });

const xml = fc.oneof(
  { weight: 8, arbitrary: document.map((d) => encodeXmlRpcValue(d)) },
  { weight: 2, arbitrary: editedText(document.map((d) => encodeXmlRpcValue(d)), fc.constantFrom("<value>", "</value>", "</struct>", "<array><data>", "<member><name>", "&amp;", "&#0;", "<!--", "<value><i4>99999999999999999999</i4></value>")) },
);

const FILE_ID = /^Ref:\d+$/;

/** parseOvaXml's contract: ids unique, and no reference of a record's own fields to an object not in the file. */
function assertResolved(ova: OvaXml): void {
  const known = new Set(ova.objects.map((o) => o.id));
  assert.equal(known.size, ova.objects.length, "object ids are unique");
  for (const { id: objectId, snapshot: record } of ova.objects) {
    for (const [field, value] of Object.entries(record)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (typeof item !== "string") continue;
        assert.ok(!(FILE_ID.test(item) && !known.has(item)), `${objectId}.${field}: ${item} dangles`);
        assert.ok(!item.startsWith("OpaqueRef:") || item === "OpaqueRef:NULL" || !Array.isArray(value), `${objectId}.${field}: leaked ${item} kept in a set`);
      }
    }
  }
}

/** A refusal of the importer: the XenAPI error with this code, or the case fails with what was thrown. */
function refusedWith(code: string, work: () => void): boolean {
  try {
    work();
    return false;
  } catch (error) {
    if (error instanceof XenApiError && error.code === code) return true;
    throw error;
  }
}

test("ova.xml: generated documents plan an import or are refused in words, within the bound", async (t) => {
  await fuzz(t, "ova.xml + planImport", BUDGET, xml, async (text) => {
    let ova: OvaXml;
    try {
      ova = await parseOvaXml(text);
    } catch (error) {
      if (error instanceof OvaXmlError) return;
      throw error;
    }
    assertResolved(ova);
    refusedWith("IMPORT_INCOMPATIBLE_VERSION", () => checkVersion(ova.version));
    let plan: ReturnType<typeof planImport> | undefined;
    if (refusedWith("IMPORT_ERROR", () => (plan = planImport(ova)))) return;
    const byId = new Map(ova.objects.map((o) => [o.id, o]));
    assert.ok(plan!.vms.length > 0);
    for (const vm of plan!.vms) {
      assert.equal(byId.get(vm.id)?.class, "VM", `planned VM ${vm.id}`);
      for (const vbd of vm.vbds) if (vbd.disk !== undefined) assert.ok(plan!.disks.has(vbd.disk), `VBD of ${vm.id} fills ${vbd.disk}, not a planned disk`);
    }
    for (const [diskId, disk] of plan!.disks) {
      assert.equal(byId.get(diskId)?.class, "VDI", `disk ${diskId}`);
      assert.ok(Number.isSafeInteger(disk.size) && disk.size >= 0 && plan!.sizes.get(diskId) === disk.size, `disk ${diskId} size ${disk.size}`);
    }
    for (const sizeId of plan!.sizes.keys()) assert.equal(byId.get(sizeId)?.class, "VDI", `size of ${sizeId}`);
  });
});
