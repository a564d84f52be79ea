// Request bodies for the fuzz targets of the two wire forms (rpc.fuzz.ts in-process, http.fuzz.ts through the
// served toolstack): well-formed calls, calls edited as text, structure-aware trees of XML-RPC's own elements
// with XML's tricky corners (entities, character references, CDATA, comments, DOCTYPE), and plain noise. The
// method names and parameters come from the caller: the served target keeps to calls that change nothing.
import fc from "fast-check";
import { editedText, xenString, xenValue } from "../fuzz-testing.ts";
import type { XenValue } from "./values.ts";
import { formatXmlRpcCall } from "./xml-rpc.ts";

export interface CallArbitraries {
  method: fc.Arbitrary<string>;
  params: fc.Arbitrary<XenValue[]>;
}

// ---- XML-RPC ----

const XML_RPC_TAGS = ["methodCall", "methodName", "params", "param", "value", "string", "int", "i4", "i8", "double", "boolean", "dateTime.iso8601", "base64", "nil", "array", "data", "struct", "member", "name"];

/** Text an XML parser treats specially. */
const xmlText = fc.oneof(
  xenString.map((s) => s.replace(/[<&]/g, "")),
  fc.constantFrom("&amp;", "&lt;", "&quot;", "&#13;", "&#x1F4BE;", "&#0;", "&#x110000;", "&#99999999999;", "&#xD800;", "&bogus;", "&", "&#;", "&#x;"),
  fc.constantFrom("<![CDATA[</value><value>]]>", "<![CDATA[", "<!-- </value></a></a></a> -->", "<!--", "<?pi x?>", "]]>", "\r\n", "\u0000", "\uFEFF"),
);

const xmlTag = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...XML_RPC_TAGS) }, fc.constantFrom("x", "a:b", "value ", "Value", "_", "1a"));
const xmlAttributes = fc.oneof({ weight: 4, arbitrary: fc.constant("") }, fc.constantFrom(' a="1"', " a='>'", ' xmlns="x"', " a", ' a="&#0;"'));

/** An element tree in XML-RPC's vocabulary, rendered; now and then malformed (a wrong closing tag, one left open). */
const xmlElement: fc.Arbitrary<string> = fc.letrec<{ node: string; element: string }>((tie) => ({
  node: fc.oneof({ depthSize: "small", maxDepth: 6, withCrossShrink: true }, xmlText, tie("element")),
  element: fc
    .record({
      tag: xmlTag,
      attributes: xmlAttributes,
      children: fc.array(tie("node"), { maxLength: 4 }),
      close: fc.oneof({ weight: 12, arbitrary: fc.constant("match") }, fc.constantFrom("self", "open", "other")),
    })
    .map(({ tag, attributes, children, close }) => {
      if (close === "self") return `<${tag}${attributes}/>`;
      const end = close === "match" ? `</${tag.trim()}>` : close === "other" ? "</value>" : "";
      return `<${tag}${attributes}>${children.join("")}${end}`;
    }),
})).element;

const xmlProlog = fc.constantFrom(
  "",
  '<?xml version="1.0"?>',
  "<?xml version='1.0' encoding='UTF-8'?>\n",
  "\uFEFF",
  '<!DOCTYPE methodCall [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>',
  '<!DOCTYPE methodCall SYSTEM "file:///etc/passwd">',
  "<!-- hello -->",
);

/** XML-RPC bodies: well-formed calls, calls edited as text, element trees inside a call's frame, and noise. */
export function xmlRpcBody({ method, params }: CallArbitraries): fc.Arbitrary<string> {
  const wellFormed = fc.tuple(method, params).map(([m, p]) => formatXmlRpcCall(m, p));
  const fragments = fc.oneof(xmlElement, xmlText, fc.constantFrom("<value>", "</value>", "<param>", "</params>", "<methodName>", "<struct><member><name>"));
  const framed = fc.tuple(xmlProlog, method, fc.array(xmlElement, { maxLength: 3 })).map(([prolog, m, children]) => `${prolog}<methodCall><methodName>${m}</methodName><params>${children.map((c) => `<param>${c}</param>`).join("")}</params></methodCall>`);
  return fc.oneof(
    { weight: 3, arbitrary: wellFormed },
    { weight: 3, arbitrary: editedText(wellFormed, fragments) },
    { weight: 3, arbitrary: framed },
    { weight: 1, arbitrary: fc.tuple(xmlProlog, xmlElement).map(([prolog, element]) => prolog + element) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
  );
}

// ---- JSON-RPC ----

/** A JSON value of a type a field must not have (and some it may). */
const anyJson = fc.oneof(fc.constant(null), fc.boolean(), fc.double(), fc.string({ maxLength: 8 }), fc.array(fc.nat(), { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 4 }), fc.nat(), { maxKeys: 2 }));

/** JSON-RPC bodies: requests with each field right, wrong, missing or twice, edited as text, nested deep, any JSON, and noise. */
export function jsonRpcBody({ method, params }: CallArbitraries): fc.Arbitrary<string> {
  const request = fc
    .record(
      {
        jsonrpc: fc.oneof(fc.constantFrom("2.0", "1.0", "2"), anyJson),
        method: fc.oneof({ weight: 4, arbitrary: method }, anyJson),
        params: fc.oneof({ weight: 4, arbitrary: params as fc.Arbitrary<unknown> }, anyJson),
        id: fc.oneof(fc.nat(), fc.string({ maxLength: 8 }), anyJson, fc.constant([[[[]]]])),
      },
      { requiredKeys: ["method"] },
    )
    .map((r) => JSON.stringify(r));
  // A member JSON.stringify would never write: a key again (the last one wins), or __proto__ as data.
  const extra = fc.tuple(fc.constantFrom("__proto__", "method", "params", "id", "jsonrpc", "constructor"), anyJson).map(([key, value]) => `"${key}":${JSON.stringify(value)},`);
  const withExtra = fc.tuple(request, extra).map(([text, member]) => `{${member}${text.slice(1)}`);
  // Nesting deeper than any stack: JSON.parse takes it; whatever walks it recursively must not.
  const depth = fc.integer({ min: 1, max: 200_000 });
  const deepParams = fc.tuple(method, depth).map(([m, n]) => `{"method":${JSON.stringify(m)},"params":[${"[".repeat(n)}${"]".repeat(n)}],"id":1}`);
  const fragments = fc.oneof(fc.constantFrom("{", "}", "[", "]", ",", ":", '"', "\\", "\\u", "\\uD800", "1e999", "-", "null", '"params":', '"method":"x"'), fc.json({ maxDepth: 2 }));
  return fc.oneof(
    { weight: 4, arbitrary: request },
    { weight: 2, arbitrary: withExtra },
    { weight: 3, arbitrary: editedText(request, fragments) },
    { weight: 1, arbitrary: deepParams },
    { weight: 1, arbitrary: fc.json({ maxDepth: 3 }) },
    { weight: 1, arbitrary: depth.map((n) => "[".repeat(n) + "]".repeat(n % 3 === 0 ? n : 0)) },
    { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 200 }) },
  );
}

/** Parameters of any shape, for parsers that never run the call. */
export const anyParams: fc.Arbitrary<XenValue[]> = fc.array(xenValue, { maxLength: 4 });
