// An XML document as a small tree of namespace-resolved elements, for the OVF descriptor. saxes (namespace
// aware, fed in slices) rather than fast-xml-parser, which knows no namespaces (OVF files bind the envelope's
// namespace to any prefix, or none) and parses a document in one step (~30 ms per 256 KiB). The text is fed a
// slice at a time with a turn of the event loop between slices, so a 4 MiB descriptor never holds it; the
// counts are checked as it goes. A DOCTYPE is refused: no entity is ever defined, expanded or fetched.
import { setImmediate as nextTurn } from "node:timers/promises";
import { SaxesParser } from "saxes";

export class XmlError extends Error {}

export interface XmlElement {
  /** The namespace URI ("" for none). */
  ns: string;
  local: string;
  /** Attributes by `{uri}local` (`local` alone for unprefixed ones, which OVF's schema leaves in no namespace). */
  attributes: Map<string, string>;
  children: XmlElement[];
  /** The element's own text (character data and CDATA directly inside it), trimmed. */
  text: string;
}

export interface XmlLimits {
  maxBytes: number;
  maxElements: number;
  maxDepth: number;
  maxAttributes: number;
}

/** Characters parsed per turn of the event loop: ~2 ms of saxes. */
const SLICE = 32 * 1024;

export function attributeKey(ns: string, local: string): string {
  return ns === "" ? local : `{${ns}}${local}`;
}

/** The document in `bytes` (UTF-8) as a tree, or an XmlError saying what is wrong and where. */
export async function parseXml(bytes: Buffer, limits: XmlLimits, signal?: AbortSignal): Promise<XmlElement> {
  if (bytes.length > limits.maxBytes) throw new XmlError(`${bytes.length} bytes: more than the ${limits.maxBytes} this document may have`);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new XmlError("the document is not UTF-8 text");
  }
  const parser = new SaxesParser({ xmlns: true, position: true });
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  let elements = 0;
  let failure: XmlError | undefined;
  const fail = (message: string) => {
    failure ??= new XmlError(`line ${parser.line}: ${message}`);
  };
  parser.on("error", (error) => fail(error.message.replace(/^[^:]*:\d+:\d+: /, "")));
  parser.on("doctype", () => fail("a DOCTYPE, which a descriptor never needs (its entities are not expanded)"));
  parser.on("opentag", (tag) => {
    if (++elements > limits.maxElements) return fail(`more than ${limits.maxElements} elements`);
    if (stack.length >= limits.maxDepth) return fail(`elements nested more than ${limits.maxDepth} deep`);
    const attributes = new Map<string, string>();
    for (const attribute of Object.values(tag.attributes)) {
      if (attribute.prefix === "xmlns" || attribute.name === "xmlns") continue;
      if (attributes.size >= limits.maxAttributes) return fail(`an element with more than ${limits.maxAttributes} attributes`);
      attributes.set(attributeKey(attribute.uri, attribute.local), attribute.value);
    }
    const element: XmlElement = { ns: tag.uri, local: tag.local, attributes, children: [], text: "" };
    if (stack.length === 0) root = element;
    else stack.at(-1)!.children.push(element);
    stack.push(element);
  });
  const addText = (chunk: string) => {
    const current = stack.at(-1);
    if (current !== undefined) current.text += chunk;
  };
  parser.on("text", addText);
  parser.on("cdata", addText);
  parser.on("closetag", () => {
    const element = stack.pop();
    if (element !== undefined) element.text = element.text.trim();
  });
  for (let at = 0; at < text.length && failure === undefined; at += SLICE) {
    parser.write(text.slice(at, at + SLICE));
    if (at + SLICE < text.length) {
      await nextTurn();
      signal?.throwIfAborted();
    }
  }
  if (failure === undefined) parser.close();
  if (failure !== undefined) throw failure;
  if (root === undefined) throw new XmlError("no element in the document");
  return root;
}

/** The children of `element` named `{ns}local` (any namespace in `ns`). */
export function childrenNamed(element: XmlElement | undefined, namespaces: readonly string[], local: string): XmlElement[] {
  return element?.children.filter((child) => child.local === local && namespaces.includes(child.ns)) ?? [];
}

export function childNamed(element: XmlElement | undefined, namespaces: readonly string[], local: string): XmlElement | undefined {
  return element?.children.find((child) => child.local === local && namespaces.includes(child.ns));
}
