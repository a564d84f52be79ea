// XML-RPC as XenAPI speaks it (compat-notes §3): a methodCall in, a methodResponse out whose value is a
// struct {Status: Success, Value} or {Status: Failure, ErrorDescription: [code, params...]}. Parsing is
// fast-xml-parser's; only the XML-RPC value model on top of it is ours. Strings and int64 values go out
// untyped (<value>text</value>), as xapi writes them (XML-RPC's <i4> is 32-bit; xen-api's parser reads an
// empty <string></string> as undefined, an empty <value></value> as "").
import { XMLParser } from "fast-xml-parser";
import { type BodyShape, exceededLimit, type ShapeLimits } from "./body-limits.ts";
import { XEN_DATE, XenDouble, type XenValue } from "./values.ts";

/** Deepest element nesting accepted unless the caller says (a struct in an array in a struct ... counts each tag). */
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

/** Where an element's tag opened at `from` ends (after its `>`; quoted attribute values skipped), or -1. */
function tagEnd(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3e /* > */) return i + 1;
    if (c === 0x22 /* " */ || c === 0x27 /* ' */) {
      i = text.indexOf(text[i]!, i + 1);
      if (i === -1) return -1;
    }
  }
  return -1;
}

/** Where markup ends (after `close`, searched from `from`), or -1. */
function endOf(text: string, close: string, from: number): number {
  const at = text.indexOf(close, from);
  return at === -1 ? -1 : at + close.length;
}

/** One piece of markup: where it starts and ends, and whether it opens an element, closes one, or both. */
interface Markup {
  kind: "open" | "close" | "empty" | "other";
  at: number;
  end: number;
}

/**
 * The markup of an XML text as fast-xml-parser reads it, in order, up to any left open (which it refuses). Where
 * it reads on to a later end (a DOCTYPE's internal subset, `?>` in quotes) this stops at the first, so what
 * follows is looked at, never skipped.
 */
function* markupOf(text: string): Generator<Markup> {
  for (let at = text.indexOf("<"); at !== -1; ) {
    let kind: Markup["kind"] = "other";
    let end: number;
    if (text[at + 1] === "/") {
      kind = "close";
      end = endOf(text, ">", at);
    } else if (text[at + 1] === "?") end = endOf(text, "?>", at + 2);
    else if (text.startsWith("<!--", at)) end = endOf(text, "-->", at + 4);
    else if (text.startsWith("<!D", at)) end = endOf(text, ">", at);
    else if (text.startsWith("<![", at)) end = endOf(text, "]]>", at + 3);
    else {
      end = tagEnd(text, at + 1);
      kind = text[end - 2] === "/" ? "empty" : "open";
    }
    if (end === -1) return;
    yield { kind, at, end };
    at = text.indexOf("<", end);
  }
}

/** What may follow a tag's name. */
const NAME_END = /[\s/>]/;

/**
 * <value> elements, all elements and the deepest element nesting of an XML text, counted without parsing it: a
 * cheap guard before the parser runs. Every `<` but a closing tag's counts as an element (the parser builds no
 * more nodes than that); the depth follows the markup.
 */
function xmlShape(text: string): Required<BodyShape> {
  let values = 0;
  let elements = 0;
  for (let at = text.indexOf("<"); at !== -1; at = text.indexOf("<", at + 1)) {
    if (text[at + 1] === "/") continue;
    elements++;
    if (text.startsWith("value", at + 1) && NAME_END.test(text[at + 6] ?? "")) values++;
  }
  let depth = 0;
  let deepest = 0;
  for (const { kind } of markupOf(text)) {
    if (kind === "close") depth--;
    else if (kind !== "other") deepest = Math.max(deepest, depth + 1);
    if (kind === "open") depth++;
  }
  return { values, depth: deepest, elements };
}

/**
 * fast-xml-parser builds text a character at a time and lets go of it only at markup: one run of 16 MiB took
 * over 512 MB of heap and 6 s. An empty CDATA section every this many characters makes it let go (and it joins
 * text and CDATA as one): the same run then takes ~0.6 s and a few MB.
 */
const TEXT_CUT = 4096;
/** The longest entity or character reference a cut steers clear of (XML writers never pad one this long). */
const REFERENCE_MAX = 64;

function cutLongText(text: string): string {
  const parts: string[] = [];
  let copied = 0;
  const cutRun = (start: number, end: number) => {
    for (let cut = start + TEXT_CUT; cut < end; cut += TEXT_CUT) {
      // Before an `&` whose reference may not have ended yet, never inside it.
      const before = text.slice(cut - REFERENCE_MAX, cut);
      const amp = before.lastIndexOf("&");
      const at = amp !== -1 && !before.includes(";", amp) ? cut - REFERENCE_MAX + amp : cut;
      parts.push(text.slice(copied, at), "<![CDATA[]]>");
      copied = at;
    }
  };
  let textStart = 0;
  for (const markup of markupOf(text)) {
    cutRun(textStart, markup.at);
    textStart = markup.end;
  }
  // Also text before markup left open: the parser builds it before it refuses.
  cutRun(textStart, text.length);
  if (copied === 0) return text;
  parts.push(text.slice(copied));
  return parts.join("");
}

/** Structure limits where the caller gives none: the depth above, any number of values. */
const DEFAULT_XML_LIMITS: ShapeLimits = { maxValues: Infinity, maxDepth: MAX_XML_DEPTH };

/** The words of the first limit an XML text exceeds, else undefined. */
export function xmlOverLimits(text: string, limits: Partial<ShapeLimits>): string | undefined {
  return exceededLimit(xmlShape(text), { ...DEFAULT_XML_LIMITS, ...limits }, "elements");
}

/** The start of a methodCall as clients write it, up to the first parameter's string (typed or not). */
const CALL_START = /^\s*(?:<\?xml[^>]*\?>\s*)?<methodCall>\s*<methodName>([^<]*)<\/methodName>\s*<params>\s*<param>\s*<value>(?:\s*<string>([^<]*)<\/string>|([^<]*)<\/value>)/;

/** The method and the first parameter of a call, read from its first bytes when they hold them. */
export function peekXmlRpcCall(prefix: string): { method: string; first: string } | undefined {
  const match = CALL_START.exec(prefix);
  return match === null ? undefined : { method: entityDecoder.decode(match[1]!).trim(), first: entityDecoder.decode(match[2] ?? match[3]!) };
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

function parseDocument(text: string, limits: Partial<ShapeLimits>): Record<string, unknown> {
  const over = xmlOverLimits(text, limits);
  if (over !== undefined) throw new XmlRpcParseError(over);
  try {
    return parser.parse(cutLongText(text), true) as Record<string, unknown>;
  } catch (error) {
    throw new XmlRpcParseError(`not well-formed XML: ${(error as Error).message}`);
  }
}

export interface XmlRpcCall {
  method: string;
  params: XenValue[];
}

/** A methodCall; `limits` are checked on the text before it is parsed. */
export function parseXmlRpcCall(body: string, limits: Partial<ShapeLimits> = {}): XmlRpcCall {
  const document = parseDocument(body, limits);
  const call = document.methodCall as Record<string, Node> | undefined;
  if (call === undefined || typeof call !== "object") throw new XmlRpcParseError("no <methodCall>");
  const method = typeof call.methodName === "string" ? call.methodName.trim() : "";
  if (method === "") throw new XmlRpcParseError("no <methodName>");
  const params = call.params === undefined || call.params === "" ? [] : ((call.params as Record<string, unknown>).param as unknown[]) ?? [];
  return { method, params: params.map((param) => decodeValue(only((param as { value?: unknown }).value, "<value> in <param>"))) };
}

/**
 * One <value> standing alone, as a task's `result` or ova.xml holds it; `limits` (<value> elements, with all
 * elements at most 4 per value, and depth; by default only the depth above) are checked before it is parsed.
 */
export function parseXmlRpcValue(text: string, limits: Partial<ShapeLimits> = {}): XenValue {
  return decodeValue(only(parseDocument(text, limits).value, "<value>"));
}

/** A carriage return as a reference: XML parsers read a literal "\r\n" or "\r" as "\n". */
const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;" };

/** Text as XML holds it: markup escaped; control characters XML 1.0 cannot carry dropped, as xapi drops them. */
function escapeXml(text: string): string {
  return text.replace(/[&<>\r]|[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/g, (c) => ESCAPES[c] ?? "");
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
