// XML-RPC as real clients write it (Python's xmlrpc.client pretty-prints with newlines, xen-api and xapi
// write no whitespace, some send untyped strings or <i8>) and as xapi answers.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { BEFORE_SESSION } from "./body-limits.ts";
import { XenDouble } from "./values.ts";
import {
  MAX_XML_DEPTH,
  encodeXmlRpcValue,
  formatXmlRpcCall,
  formatXmlRpcFailure,
  formatXmlRpcSuccess,
  parseXmlRpcCall,
  parseXmlRpcValue,
  peekXmlRpcCall,
  xmlOverLimits,
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

describe("XML-RPC request limits", () => {
  const refusal = (words: string) => (error: unknown) => error instanceof XmlRpcParseError && error.message === words;

  test("values are <value> elements; every element counts against 4 per value", () => {
    const body = call(param("<struct><member><name>a</name><value><values>x</values></value></member></struct>") + "<param><value/></param>");
    // Three <value>s: the <values> element is not one.
    assert.equal(xmlOverLimits(body, { maxValues: 3 }), undefined);
    assert.equal(xmlOverLimits(body, { maxValues: 2 }), "more than 2 values");
    const padded = call(param(`<array><data>${"<x/>".repeat(20)}</data></array>`));
    assert.equal(xmlOverLimits(padded, { maxValues: 5 }), "more than 24 elements (4 for each value)");
    assert.throws(() => parseXmlRpcCall(padded, { maxValues: 5 }), refusal("more than 24 elements (4 for each value)"));
  });

  test("depth follows the markup as the parser reads it: tags in CDATA, comments and quotes are text", () => {
    const nest = (levels: number, inside = "x") => param("<array><data><value>".repeat(levels) + inside + "</value></data></array>".repeat(levels));
    const fits = Math.floor((MAX_XML_DEPTH - 4) / 3);
    const fakeCloses = "<string><![CDATA[</a></a></a></a>]]><!-- </a></a> --></string>";
    assert.throws(() => parseXmlRpcCall(call(nest(fits + 1, fakeCloses))), refusal("nesting deeper than 64 elements"));
    const fakeOpens = `<string><![CDATA[${"<a>".repeat(100)}]]><!-- ${"<a>".repeat(100)} --></string>`;
    assert.equal(parseXmlRpcCall(call(param(fakeOpens))).params[0], "<a>".repeat(100));
    assert.equal(xmlOverLimits(call(`<param a=">"><value b='<x>'>v</value></param>`), { maxDepth: 4 }), undefined);
  });

  test("parseXmlRpcValue takes limits of its own; by default only the depth", () => {
    const list = encodeXmlRpcValue(Array.from({ length: 100_000 }, (_, i) => String(i)));
    assert.equal((parseXmlRpcValue(list) as string[]).length, 100_000);
    assert.throws(() => parseXmlRpcValue(list, { maxValues: 50_000 }), refusal("more than 50000 values"));
    assert.throws(() => parseXmlRpcValue(encodeXmlRpcValue([[["x"]]]), { maxDepth: 9 }), refusal("nesting deeper than 9 elements"));
  });

  test("before a session the refusal says so", () => {
    assert.equal(
      xmlOverLimits(call(param("<array><data>" + "<value/>".repeat(1000) + "</data></array>")), BEFORE_SESSION),
      "more than 1000 values without a live session as the first parameter (login and system.* calls get no more)",
    );
  });

  test("long text is read in pieces by the parser, to the same value: references across the cuts, CR, CDATA", () => {
    // Pieces of 4096 characters after 4090 others: each cut (every 4096th character) falls in a &#13;.
    const piece = "&amp;&#13;\r\n&#x1F4BE;" + "x".repeat(4096 - 21);
    const raw = "y".repeat(4090) + piece.repeat(5) + "<![CDATA[&amp; stays]]>" + piece.repeat(3);
    // A raw CRLF is read as LF, a &#13; kept.
    const expected = ("y".repeat(4090) + piece.repeat(5) + "&amp;amp; stays" + piece.repeat(3))
      .replace(/\r\n/g, "\n")
      .replace(/&amp;|&#13;|&#x1F4BE;/g, (reference) => ({ "&amp;": "&", "&#13;": "\r", "&#x1F4BE;": "\u{1F4BE}" })[reference]!);
    assert.equal(decode(raw), expected);
    assert.equal(decode(`<string>${raw}</string>`), expected);
    assert.deepEqual(parseXmlRpcCall(call(param(raw) + param("<i4>7</i4>"))).params, [expected, 7]);
  });
});

describe("XML-RPC peek", () => {
  test("the method and the first parameter, from the first bytes of a call as clients write it", () => {
    const wanted = { method: "VM.set_other_config", first: "OpaqueRef:s" };
    // Python's xmlrpc.client, cut short as a peek sees it
    assert.deepEqual(
      peekXmlRpcCall("<?xml version='1.0'?>\n<methodCall>\n<methodName>VM.set_other_config</methodName>\n<params>\n<param>\n<value><string>OpaqueRef:s</string></value>\n</param>\n<param>\n<val"),
      wanted,
    );
    // xen-api: untyped strings, no whitespace
    assert.deepEqual(peekXmlRpcCall(formatXmlRpcCall("VM.set_other_config", ["OpaqueRef:s", "OpaqueRef:vm", { a: "b" }])), wanted);
    assert.deepEqual(peekXmlRpcCall(call(param("OpaqueRef:&#115;"), "VM.set_other&#95;config")), wanted);
  });

  test("what it cannot read from the first bytes is no peek", () => {
    for (const prefix of [call(param("<array><data><value>OpaqueRef:s</value></data></array>")), call(""), "<methodCall><methodName>m</methodName><params><param><value>OpaqueRef:s", "not xml"]) {
      assert.equal(peekXmlRpcCall(prefix), undefined, prefix);
    }
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
    assert.equal(encodeXmlRpcValue("tab\tline\ncr\rbell\u0007nul\u0000"), "<value>tab\tline\ncr&#13;bellnul</value>", "characters XML cannot carry are dropped");
    // A literal CR would come back as LF (XML's line-end handling): as a reference it comes back as it was.
    assert.equal(parseXmlRpcValue(encodeXmlRpcValue("a\r\nb\rc")), "a\r\nb\rc");
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
