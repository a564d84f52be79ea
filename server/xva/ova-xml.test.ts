// ova.xml as xapi writes it (one line, untyped values) and as real exports come (pretty-printed with a prolog,
// <value/>, entities, ids not contiguous, dangling and leaked references).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { formatOvaXml, OvaXmlError, parseOvaXml, type OvaXml } from "./ova-xml.ts";

const VERSION = { hostname: "host1", date: "20261123T10:08:00Z", product_version: "8.2.1", product_brand: "XCP-ng", build_number: "release/yangtze", xapi_major: 1, xapi_minor: 20, export_vsn: 2 };

const PRETTY = `<?xml version="1.0" encoding="UTF-8"?>
<value>
  <struct>
    <member><name>version</name><value><struct>
      <member><name>hostname</name><value><string>h &amp; &lt;x&gt; &quot;q&quot;</string></value></member>
      <member><name>date</name><value><dateTime.iso8601>20261123T10:08:00Z</dateTime.iso8601></value></member>
      <member><name>product_version</name><value/></member>
      <member><name>product_brand</name><value></value></member>
      <member><name>build_number</name><value>b</value></member>
      <member><name>xapi_major</name><value><i4>1</i4></value></member>
      <member><name>xapi_minor</name><value><i8>20</i8></value></member>
      <member><name>export_vsn</name><value><int>2</int></value></member>
    </struct></value></member>
    <member><name>objects</name><value><array><data>
      <value><struct>
        <member><name>class</name><value>VDI</value></member>
        <member><name>id</name><value>Ref:12</value></member>
        <member><name>snapshot</name><value><struct>
          <member><name>SR</name><value>Ref:99</value></member>
          <member><name>VBDs</name><value><array><data><value>Ref:3</value><value>OpaqueRef:4b1c6bd2-8b0e-4d7a-9a42-6a0f1e8f3b21</value><value>Ref:5</value></data></array></value></member>
          <member><name>snapshot_of</name><value>OpaqueRef:NULL</value></member>
          <member><name>parent</name><value>OpaqueRef:4b1c6bd2-8b0e-4d7a-9a42-6a0f1e8f3b21</value></member>
          <member><name>other_config</name><value><struct><member><name>note</name><value>Ref:99</value></member></struct></value></member>
          <member><name>tags</name><value><array><data/></array></value></member>
          <member><name>sm_config</name><value><struct/></value></member>
          <member><name>sharable</name><value><boolean>0</boolean></value></member>
          <member><name>physical_utilisation</name><value><double>1.5</double></value></member>
          <member><name>virtual_size</name><value>10737418240</value></member>
        </struct></value></member>
      </struct></value>
      <value><struct>
        <member><name>class</name><value>VBD</value></member>
        <member><name>id</name><value>Ref:3</value></member>
        <member><name>snapshot</name><value/></member>
      </struct></value>
    </data></array></value></member>
  </struct>
</value>
`;

describe("parseOvaXml", () => {
  test("a pretty-printed export with a prolog, typed and untyped values, entities and empty values", async () => {
    const ova = await parseOvaXml(PRETTY);
    assert.deepEqual(ova.version, { hostname: 'h & <x> "q"', date: "20261123T10:08:00Z", product_version: "", product_brand: "", build_number: "b", xapi_major: 1, xapi_minor: 20, export_vsn: 2 });
    assert.deepEqual(ova.objects.map((object) => [object.class, object.id]), [["VDI", "Ref:12"], ["VBD", "Ref:3"]]);
    const vdi = ova.objects[0]!.snapshot;
    // Ref:99 has no object and OpaqueRef:<uuid> is a leaked internal ref: both null; in a set they are dropped.
    assert.equal(vdi.SR, "OpaqueRef:NULL");
    assert.equal(vdi.parent, "OpaqueRef:NULL");
    assert.equal(vdi.snapshot_of, "OpaqueRef:NULL");
    assert.deepEqual(vdi.VBDs, ["Ref:3"]);
    // Maps are user data: left alone.
    assert.deepEqual(vdi.other_config, { note: "Ref:99" });
    assert.deepEqual(vdi.tags, []);
    assert.deepEqual(vdi.sm_config, {});
    assert.equal(vdi.sharable, false);
    assert.equal(vdi.virtual_size, "10737418240");
    assert.deepEqual(ova.objects[1]!.snapshot, {});
  });

  test("version ints as bare text; export_vsn may be missing", async () => {
    const xml = formatOvaXml({ version: VERSION, objects: [] }).replace("<member><name>export_vsn</name><value>2</value></member>", "");
    assert.equal((await parseOvaXml(xml)).version.export_vsn, 0);
    assert.equal((await parseOvaXml(xml)).version.xapi_minor, 20);
  });

  const bad: [string, string, RegExp][] = [
    ["not XML", "<value><struct>", /ova.xml: /],
    ["no version", "<value><struct><member><name>objects</name><value><array><data/></array></value></member></struct></value>", /version/],
    ["an object without an id", formatOvaXml({ version: VERSION, objects: [] }).replace("<data></data>", "<data><value><struct><member><name>class</name><value>VM</value></member><member><name>snapshot</name><value><struct/></value></member></struct></value></data>"), /id/],
    ["an xapi_major that is not an int", formatOvaXml({ version: VERSION, objects: [] }).replace("<name>xapi_major</name><value>1</value>", "<name>xapi_major</name><value>one</value>"), /xapi_major/],
    [
      "an id twice",
      formatOvaXml({ version: VERSION, objects: [{ class: "VM", id: "Ref:1", snapshot: {} }, { class: "VBD", id: "Ref:1", snapshot: {} }] }),
      /object id Ref:1 appears twice/,
    ],
  ];
  for (const [what, xml, message] of bad) {
    test(`refuses ${what}`, async () => {
      await assert.rejects(parseOvaXml(xml), (error: Error) => error instanceof OvaXmlError && message.test(error.message));
    });
  }
});

describe("formatOvaXml", () => {
  test("one line, no prolog, ints bare, booleans 0|1, and it parses back to the same records", async () => {
    const ova: OvaXml = {
      version: VERSION,
      objects: [
        { class: "VM", id: "Ref:7", snapshot: { name_label: "a <b> & c", VBDs: ["Ref:2"], is_a_template: false, memory_static_max: "4294967296", other_config: {} } },
        { class: "VBD", id: "Ref:2", snapshot: { VM: "Ref:7", VDI: "OpaqueRef:NULL", empty: true } },
      ],
    };
    const xml = formatOvaXml(ova);
    assert.ok(xml.startsWith("<value><struct><member><name>version</name>"));
    assert.ok(!xml.includes("\n"));
    assert.ok(xml.includes("<member><name>xapi_major</name><value>1</value></member>"));
    assert.ok(xml.includes("<boolean>0</boolean>"));
    assert.ok(xml.includes("a &lt;b&gt; &amp; c"));
    assert.deepEqual(await parseOvaXml(xml), ova);
  });
});
