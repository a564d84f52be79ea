// XML-RPC as real clients write it (Python's xmlrpc.client pretty-prints with newlines, xen-api and xapi
// write no whitespace, some send untyped strings or <i8>) and as xapi answers.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { XenDouble } from "./values.ts";
import {
  MAX_XML_DEPTH,
  encodeXmlRpcValue,
  formatXmlRpcCall,
  formatXmlRpcFailure,
  formatXmlRpcSuccess,
  parseXmlRpcCall,
  parseXmlRpcValue,
  XmlRpcParseError,
} from "./xml-rpc.ts";

const call = (params: string, method = "m") => `<methodCall><methodName>${method}</methodName><params>${params}</params></methodCall>`;
const param = (value: string) => `<param><value>${value}</value></param>`;
/** The one parameter of a call holding `value` (the inside of a <value>). */
const decode = (value: string) => parseXmlRpcCall(call(param(value))).params[0];

describe("XML-RPC requests", () => {
  test("a login as Python's xmlrpc.client writes it: prolog, newlines between tags", () => {
    const body =
      "<?xml version='1.0'?>\n<methodCall>\n<methodName>session.login_with_password</methodName>\n<params>\n" +
      "<param>\n<value><string>root</string></value>\n</param>\n<param>\n<value><string>s3cret</string></value>\n</param>\n" +
      "</params>\n</methodCall>\n";
    assert.deepEqual(parseXmlRpcCall(body), { method: "session.login_with_password", params: ["root", "s3cret"] });
  });

  test("whitespace between tags is ignored, whitespace inside strings is kept", () => {
    const body = `<?xml version="1.0" encoding="UTF-8"?>
      <methodCall>
        <methodName> VM.get_record </methodName>
        <params>
          <param> <value> <struct>
            <member> <name>a</name> <value>  two  spaces  </value> </member>
            <member> <name>b</name> <value><string> </string></value> </member>
            <member> <name>c</name> <value> <array> <data>
              <value>x</value>
              <value> <i4>1</i4> </value>
            </data> </array> </value> </member>
          </struct> </value> </param>
        </params>
      </methodCall>`;
    assert.deepEqual(parseXmlRpcCall(body), { method: "VM.get_record", params: [{ a: "  two  spaces  ", b: " ", c: ["x", 1] }] });
  });

  test("untyped values are strings; <string> the same", () => {
    assert.equal(decode("OpaqueRef:abc"), "OpaqueRef:abc");
    assert.equal(decode("<string>OpaqueRef:abc</string>"), "OpaqueRef:abc");
    assert.equal(decode("42"), "42", "an untyped 42 stays a string (int64 travels as strings)");
  });

  test("empty values: <value/>, <value></value>, <string/>, <struct/>, <array><data/></array>, <nil/>", () => {
    const body = call(
      [
        "<param><value/></param>",
        param(""),
        param("<string/>"),
        param("<string></string>"),
        param("<struct/>"),
        param("<struct></struct>"),
        param("<array><data/></array>"),
        param("<array><data></data></array>"),
        param("<nil/>"),
      ].join(""),
    );
    assert.deepEqual(parseXmlRpcCall(body).params, ["", "", "", "", {}, {}, [], [], null]);
  });

  test("no <params> at all, or an empty one, is a call without parameters", () => {
    assert.deepEqual(parseXmlRpcCall("<methodCall><methodName>system.listMethods</methodName></methodCall>").params, []);
    assert.deepEqual(parseXmlRpcCall("<methodCall><methodName>system.listMethods</methodName><params/></methodCall>").params, []);
    assert.deepEqual(parseXmlRpcCall("<methodCall><methodName>system.listMethods</methodName><params></params></methodCall>").params, []);
  });

  test("integers: <i4>, <i8>, <int>, with signs; int64 as xapi's clients send them (strings)", () => {
    assert.equal(decode("<i4>-2147483648</i4>"), -2147483648);
    assert.equal(decode("<int>+7</int>"), 7);
    assert.equal(decode("<i8>9007199254740991</i8>"), 9007199254740991);
    assert.equal(decode("<string>10737418240</string>"), "10737418240");
    assert.throws(() => decode("<i4>1.5</i4>"), XmlRpcParseError);
    assert.throws(() => decode("<int></int>"), XmlRpcParseError);
  });

  test("<boolean>, <double>, <dateTime.iso8601>", () => {
    assert.equal(decode("<boolean>1</boolean>"), true);
    assert.equal(decode("<boolean>0</boolean>"), false);
    assert.throws(() => decode("<boolean>true</boolean>"), XmlRpcParseError);
    const double = decode("<double>60.1</double>");
    assert.ok(double instanceof XenDouble);
    assert.equal(double.value, 60.1);
    assert.equal((decode("<double>-1e3</double>") as XenDouble).value, -1000);
    assert.throws(() => decode("<double>fast</double>"), XmlRpcParseError);
    assert.throws(() => decode("<double></double>"), XmlRpcParseError);
    assert.equal(decode("<dateTime.iso8601>20261123T10:08:00Z</dateTime.iso8601>"), "20261123T10:08:00Z");
  });

  test("entities: the five XML ones, decimal and hex character references, CDATA", () => {
    assert.equal(decode("a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos;"), `a & b <c> "d" 'e'`);
    assert.equal(decode("<string>&#65;&#x42;&#x1F4BE;&#13;</string>"), "AB\u{1F4BE}\r");
    assert.equal(decode("<string>&amp;#65;</string>"), "&#65;", "an escaped ampersand is not decoded twice");
    assert.equal(decode("<string><![CDATA[<not a tag> & all]]></string>"), "<not a tag> & all");
    assert.equal(parseXmlRpcCall(call("", "a&amp;b")).method, "a&b");
    const declared = `<!DOCTYPE methodCall [<!ENTITY big "expanded">]>${call(param("&big;"))}`;
    assert.equal(parseXmlRpcCall(declared).params[0], "&big;", "entities a DOCTYPE declares are not expanded");
  });

  test("struct members keep every name, __proto__ included, and the last of a repeated name wins", () => {
    const member = (name: string, value: string) => `<member><name>${name}</name><value>${value}</value></member>`;
    const decoded = decode(`<struct>${member("__proto__", "<struct>" + member("polluted", "yes") + "</struct>")}${member("k", "1")}${member("k", "2")}${member("", "empty")}</struct>`);
    assert.deepEqual(Object.keys(decoded as object), ["__proto__", "k", ""]);
    assert.deepEqual((decoded as Record<string, unknown>)["__proto__"], { polluted: "yes" });
    assert.equal((decoded as Record<string, unknown>).k, "2");
    assert.equal(Object.getPrototypeOf(decoded), Object.prototype);
  });

  test("nesting up to MAX_XML_DEPTH elements parses, deeper is refused before parsing", () => {
    // methodCall, params, param, value = 4 elements; each array level adds array, data, value = 3.
    const nest = (levels: number) => param("<array><data><value>".repeat(levels) + "x" + "</value></data></array>".repeat(levels));
    const fits = Math.floor((MAX_XML_DEPTH - 4) / 3);
    let value = parseXmlRpcCall(call(nest(fits))).params[0];
    for (let level = 0; level < fits; level++) value = (value as unknown[])[0] as typeof value;
    assert.equal(value, "x");
    assert.throws(() => parseXmlRpcCall(call(nest(fits + 1))), (error) => error instanceof XmlRpcParseError && /nesting deeper than 64/.test(error.message));
    assert.throws(() => parseXmlRpcCall(call(nest(100_000))), XmlRpcParseError);
  });

  test("malformed requests are XmlRpcParseError with the reason", () => {
    const bad: Array<[string, RegExp]> = [
      ["", /no <methodCall>|not well-formed/],
      ["not xml at all", /not well-formed/],
      ["<methodCall><methodName>m</methodName>", /not well-formed/],
      [call(param("<string>a</value>")), /not well-formed/],
      ["<methodResponse/>", /no <methodCall>/],
      ["<methodCall><params/></methodCall>", /no <methodName>/],
      [call(param("<struct><member><value>x</value></member></struct>")), /<member> without <name>/],
      [call(param("<array>x</array>")), /<array> without <data>/],
      [call(param("<i4>1</i4><i4>2</i4>")), /one typed element/],
      [call(param("<base64>AAAA</base64>")), /unknown XML-RPC type <base64>/],
      [call("<param></param>"), /expected one <value> in <param>/],
      [call(param("<string>&#x110000;</string>")), /not well-formed/],
    ];
    for (const [body, reason] of bad) assert.throws(() => parseXmlRpcCall(body), (error: unknown) => error instanceof XmlRpcParseError && reason.test(error.message), body);
  });
});

describe("XML-RPC responses", () => {
  test("Success and Failure as xapi writes them: one line, no whitespace between tags, strings untyped", () => {
    assert.equal(
      formatXmlRpcSuccess("OpaqueRef:x"),
      '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>Status</name><value>Success</value></member>' +
        "<member><name>Value</name><value>OpaqueRef:x</value></member></struct></value></param></params></methodResponse>",
    );
    assert.equal(
      formatXmlRpcFailure(["SESSION_INVALID", "OpaqueRef:y"]),
      '<?xml version="1.0"?><methodResponse><params><param><value><struct><member><name>Status</name><value>Failure</value></member>' +
        "<member><name>ErrorDescription</name><value><array><data><value>SESSION_INVALID</value><value>OpaqueRef:y</value>" +
        "</data></array></value></member></struct></value></param></params></methodResponse>",
    );
  });

  test("values: strings and int64 untyped, floats as <double>, dates, booleans, nested structs, escaping", () => {
    assert.equal(encodeXmlRpcValue(10737418240), "<value>10737418240</value>");
    assert.equal(encodeXmlRpcValue(""), "<value></value>", "empty: xen-api reads <string></string> as undefined");
    assert.equal(encodeXmlRpcValue(0.25), "<value><double>0.25</double></value>");
    assert.equal(encodeXmlRpcValue(new XenDouble(1)), "<value><double>1</double></value>");
    assert.equal(encodeXmlRpcValue("20261123T10:08:00Z"), "<value><dateTime.iso8601>20261123T10:08:00Z</dateTime.iso8601></value>");
    assert.equal(encodeXmlRpcValue(true), "<value><boolean>1</boolean></value>");
    assert.equal(encodeXmlRpcValue(null), "<value></value>");
    assert.equal(encodeXmlRpcValue([]), "<value><array><data></data></array></value>");
    assert.equal(encodeXmlRpcValue({}), "<value><struct></struct></value>");
    assert.equal(
      encodeXmlRpcValue({ "a<b": ["x&y", { n: 1 }] }),
      "<value><struct><member><name>a&lt;b</name><value><array><data><value>x&amp;y</value>" +
        "<value><struct><member><name>n</name><value>1</value></member></struct></value></data></array></value></member></struct></value>",
    );
    assert.equal(encodeXmlRpcValue("tab\tline\ncr\rbell\u0007nul\u0000"), "<value>tab\tline\ncr\rbellnul</value>", "characters XML cannot carry are dropped");
  });

  test("a methodCall as clients send it parses back", () => {
    const params = ["OpaqueRef:s", { SR: "OpaqueRef:sr", virtual_size: 1073741824, sharable: false }, ["a"]];
    assert.deepEqual(parseXmlRpcCall(formatXmlRpcCall("VDI.create", params)), { method: "VDI.create", params: [params[0], { SR: "OpaqueRef:sr", virtual_size: "1073741824", sharable: false }, ["a"]] });
  });

  test("what is encoded parses back (a task's result is read this way)", () => {
    const value = { ref: "OpaqueRef:1", list: ["a", "<b>", ""], nested: { ok: true, off: false, none: {} }, progress: new XenDouble(0.5) };
    assert.deepEqual(parseXmlRpcValue(encodeXmlRpcValue(value)), { ...value, progress: new XenDouble(0.5) });
    assert.equal(parseXmlRpcValue("<value>OpaqueRef:2</value>\n"), "OpaqueRef:2");
    assert.throws(() => parseXmlRpcValue("<struct/>"), XmlRpcParseError);
  });
});
