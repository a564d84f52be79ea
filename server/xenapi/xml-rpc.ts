// XML-RPC as XenAPI speaks it (compat-notes §3): a methodCall in, a methodResponse out whose value is a
// struct {Status: Success, Value} or {Status: Failure, ErrorDescription: [code, params...]}. Parsing is
// fast-xml-parser's; only the XML-RPC value model on top of it is ours. Strings and int64 values go out
// untyped (<value>text</value>), as xapi writes them (XML-RPC's <i4> is 32-bit; xen-api's parser reads an
// empty <string></string> as undefined, an empty <value></value> as "").
import { XMLParser } from "fast-xml-parser";
import { XEN_DATE, XenDouble, type XenValue } from "./values.ts";

/** Deepest element nesting accepted in a request (a struct in an array in a struct ... counts each tag). */
export const MAX_XML_DEPTH = 64;

export class XmlRpcParseError extends Error {}

const XML_ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/**
 * XML's own entities and character references (&#13;, &#x1F4BE;: clients escape control characters so).
 * Entities a DOCTYPE declares are not expanded: XML-RPC has no DTD, and expansion is an attack surface.
 */
export const entityDecoder = {
  decode: (text: string) =>
    text.replace(/&(?:#x([0-9a-fA-F]+)|#([0-9]+)|([a-z]+));/g, (whole, hex?: string, decimal?: string, name?: string) =>
      name !== undefined ? (XML_ENTITIES[name] ?? whole) : String.fromCodePoint(hex !== undefined ? parseInt(hex, 16) : Number(decimal)),
    ),
  setExternalEntities: () => undefined,
  addInputEntities: () => undefined,
  reset: () => undefined,
  setXmlVersion: () => undefined,
};

const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false,
  trimValues: false,
  processEntities: true,
  entityDecoder,
  ignoreDeclaration: true,
  ignorePiTags: true,
  isArray: (name) => name === "param" || name === "member" || name === "value",
});

/** Element depth of an XML text, counted without parsing it (a cheap guard before the parser runs). */
function xmlDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  const tags = /<(\/?)[A-Za-z][^>]*?(\/?)>/g;
  for (let match = tags.exec(text); match !== null; match = tags.exec(text)) {
    if (match[1] === "/") depth--;
    else if (match[2] !== "/") deepest = Math.max(deepest, ++depth);
  }
  return deepest;
}

type Node = Record<string, unknown> | string;

function only<T>(list: unknown, what: string): T {
  if (!Array.isArray(list) || list.length !== 1) throw new XmlRpcParseError(`expected one ${what}`);
  return list[0] as T;
}

/** One <value>: untyped text is a string; typed children by their tag. */
function decodeValue(node: unknown): XenValue {
  if (typeof node === "string") return node;
  if (node === null || typeof node !== "object") throw new XmlRpcParseError("malformed <value>");
  const entries = Object.entries(node as Record<string, unknown>).filter(([key]) => key !== "#text");
  if (entries.length === 0) {
    const text = (node as Record<string, unknown>)["#text"];
    return typeof text === "string" ? text : "";
  }
  const [type, inner] = entries[0]!;
  // Two elements of one type come as an array.
  if (entries.length !== 1 || Array.isArray(inner)) throw new XmlRpcParseError("a <value> holds one typed element");
  const text = typeof inner === "string" ? inner : "";
  switch (type) {
    case "string":
      return text;
    case "i4":
    case "i8":
    case "int": {
      if (!/^\s*[+-]?\d+\s*$/.test(text)) throw new XmlRpcParseError(`<${type}> holds ${JSON.stringify(text)}`);
      return Number(text);
    }
    case "boolean":
      if (text.trim() !== "0" && text.trim() !== "1") throw new XmlRpcParseError(`<boolean> holds ${JSON.stringify(text)}`);
      return text.trim() === "1";
    case "double": {
      const value = Number(text);
      if (text.trim() === "" || !Number.isFinite(value)) throw new XmlRpcParseError(`<double> holds ${JSON.stringify(text)}`);
      return new XenDouble(value);
    }
    case "dateTime.iso8601":
      return text.trim();
    case "nil":
      return null;
    case "array": {
      const data = inner === "" ? "" : (inner as Record<string, unknown>).data;
      if (data === undefined) throw new XmlRpcParseError("<array> without <data>");
      if (data === "" || typeof data !== "object") return [];
      return ((data as Record<string, unknown>).value as unknown[] | undefined)?.map(decodeValue) ?? [];
    }
    case "struct": {
      const out: Record<string, XenValue> = {};
      const members = inner === "" ? [] : ((inner as Record<string, unknown>).member as unknown[] | undefined) ?? [];
      for (const member of members) {
        const { name, value } = member as { name?: unknown; value?: unknown };
        if (typeof name !== "string") throw new XmlRpcParseError("<member> without <name>");
        // Defined, not assigned: a member named __proto__ is data, as it is in JSON.
        Object.defineProperty(out, name, { value: decodeValue(only(value, "<value> in <member>")), enumerable: true, writable: true, configurable: true });
      }
      return out;
    }
    default:
      throw new XmlRpcParseError(`unknown XML-RPC type <${type}>`);
  }
}

function parseDocument(text: string): Record<string, unknown> {
  if (xmlDepth(text) > MAX_XML_DEPTH) throw new XmlRpcParseError(`nesting deeper than ${MAX_XML_DEPTH} elements`);
  try {
    return parser.parse(text, true) as Record<string, unknown>;
  } catch (error) {
    throw new XmlRpcParseError(`not well-formed XML: ${(error as Error).message}`);
  }
}

export function parseXmlRpcCall(body: string): { method: string; params: XenValue[] } {
  const document = parseDocument(body);
  const call = document.methodCall as Record<string, Node> | undefined;
  if (call === undefined || typeof call !== "object") throw new XmlRpcParseError("no <methodCall>");
  const method = typeof call.methodName === "string" ? call.methodName.trim() : "";
  if (method === "") throw new XmlRpcParseError("no <methodName>");
  const params = call.params === undefined || call.params === "" ? [] : ((call.params as Record<string, unknown>).param as unknown[]) ?? [];
  return { method, params: params.map((param) => decodeValue(only((param as { value?: unknown }).value, "<value> in <param>"))) };
}

/** One <value> standing alone, as a task's `result` holds it. */
export function parseXmlRpcValue(text: string): XenValue {
  return decodeValue(only(parseDocument(text).value, "<value>"));
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;" };

/** Text as XML holds it: markup escaped; control characters XML 1.0 cannot carry dropped, as xapi drops them. */
function escapeXml(text: string): string {
  return text.replace(/[&<>]|[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/g, (c) => ESCAPES[c] ?? "");
}

/** One value as XML-RPC, the way xapi writes it: no whitespace between tags. */
export function encodeXmlRpcValue(value: XenValue | undefined): string {
  if (value === null || value === undefined) return "<value></value>";
  if (value instanceof XenDouble) return `<value><double>${value.value}</double></value>`;
  switch (typeof value) {
    case "string":
      return XEN_DATE.test(value)
        ? `<value><dateTime.iso8601>${value}</dateTime.iso8601></value>`
        : `<value>${escapeXml(value)}</value>`;
    case "number":
      return Number.isInteger(value) ? `<value>${value}</value>` : `<value><double>${value}</double></value>`;
    case "boolean":
      return `<value><boolean>${value ? 1 : 0}</boolean></value>`;
  }
  if (Array.isArray(value)) return `<value><array><data>${value.map(encodeXmlRpcValue).join("")}</data></array></value>`;
  const members = Object.entries(value)
    .map(([name, member]) => `<member><name>${escapeXml(name)}</name>${encodeXmlRpcValue(member)}</member>`)
    .join("");
  return `<value><struct>${members}</struct></value>`;
}

/** A methodCall as a client sends it (tests, benchmarks). */
export function formatXmlRpcCall(method: string, params: readonly XenValue[]): string {
  return `<?xml version="1.0"?><methodCall><methodName>${escapeXml(method)}</methodName><params>${params.map((p) => `<param>${encodeXmlRpcValue(p)}</param>`).join("")}</params></methodCall>`;
}

function response(value: XenValue): string {
  return `<?xml version="1.0"?><methodResponse><params><param>${encodeXmlRpcValue(value)}</param></params></methodResponse>`;
}

export function formatXmlRpcSuccess(value: XenValue): string {
  return response({ Status: "Success", Value: value });
}

export function formatXmlRpcFailure(description: readonly string[]): string {
  return response({ Status: "Failure", ErrorDescription: [...description] });
}
