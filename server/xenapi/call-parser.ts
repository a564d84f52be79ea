// API call bodies, and other XML-RPC documents (an XVA's ova.xml), parsed without holding up the event loop.
// A small body is parsed where it arrives; a larger one in a worker thread (fast-xml-parser takes ~100 ms per MiB, JSON.parse up to ~90 ms for 16 MiB), whose
// heap is capped and which is ended when idle, so a large body's memory goes back. The parameters come back
// as flat arrays (a structured clone of the tree costs ~3 µs per value on this side, in one piece), their
// strings as UTF-8 bytes that are moved, not copied (a 15 MB string took ~50 ms to receive, in one piece),
// and are rebuilt here in slices of a few ms.
import { setImmediate as nextTurn } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import type { ShapeLimits } from "./body-limits.ts";
import { type JsonRpcCall, JsonRpcRequestError, parseJsonRpcCall } from "./json-rpc.ts";
import { parseXmlRpcCall, type XmlRpcCall, XmlRpcParseError } from "./xml-rpc.ts";
import { XenDouble, type XenValue } from "./values.ts";

/** Bodies up to this size are parsed inline: a few ms at most, XML included. */
const INLINE_MAX_BYTES = 64 * 1024;
/** The worker is ended after this long without a body. */
const IDLE_MS = 2000;
/** The worker's old-generation heap: a body at the largest limits needs under half of it. */
const WORKER_HEAP_MB = 256;
/** How long a rebuild runs before it lets the event loop turn. */
const SLICE_MS = 5;

/** One kind per value, in document order; a container's values follow it up to its END. */
export const KIND = { STRING: 0, NUMBER: 1, DOUBLE: 2, TRUE: 3, FALSE: 4, NULL: 5, ARRAY: 6, OBJECT: 7, END: 8 } as const;

/** Values as flat arrays, cheap to hand from a worker: strings (an object's keys before their values) as one UTF-8 text. */
export interface FlatValues {
  kinds: Uint8Array<ArrayBuffer>;
  text: Uint8Array<ArrayBuffer>;
  /** Where each string ends in `text`, in bytes. */
  ends: Uint32Array<ArrayBuffer>;
  numbers: Float64Array<ArrayBuffer>;
}

export interface ParseRequest {
  /** A JSON-RPC or XML-RPC call, or one XML-RPC value (a document whose root is <value>). */
  protocol: "json" | "xml" | "xml-value";
  chunks: Uint8Array[];
  limits: ShapeLimits;
}

export type ParseAnswer =
  | { call: Omit<JsonRpcCall, "params"> | Omit<XmlRpcCall, "params"> | null; params: FlatValues }
  | { refused: { message: string; rpcCode?: number; id?: unknown; version?: JsonRpcCall["version"] } };

/** The values again, built in slices between which the event loop turns. */
async function unflatten(flat: FlatValues): Promise<XenValue[]> {
  let strings = 0;
  let stringStart = 0;
  let numbers = 0;
  const text = Buffer.from(flat.text.buffer, flat.text.byteOffset, flat.text.byteLength);
  const nextString = () => text.toString("utf8", stringStart, (stringStart = flat.ends[strings++]!));
  // A leaf, or the empty container its values go into.
  const newValue = (kind: number): XenValue => {
    switch (kind) {
      case KIND.STRING:
        return nextString();
      case KIND.NUMBER:
        return flat.numbers[numbers++]!;
      case KIND.DOUBLE:
        return new XenDouble(flat.numbers[numbers++]!);
      case KIND.TRUE:
        return true;
      case KIND.FALSE:
        return false;
      case KIND.ARRAY:
        return [];
      case KIND.OBJECT:
        return {};
      default:
        return null;
    }
  };
  const open: Array<XenValue[] | Record<string, XenValue>> = [];
  let root: XenValue = [];
  let sliceStart = performance.now();
  for (let i = 0; i < flat.kinds.length; i++) {
    if (i % 1024 === 0 && performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
    const kind = flat.kinds[i]!;
    if (kind === KIND.END) {
      open.pop();
      continue;
    }
    const parent = open.at(-1);
    const key = parent === undefined || Array.isArray(parent) ? undefined : nextString();
    const value = newValue(kind);
    if (parent === undefined) root = value;
    else if (key === undefined) (parent as XenValue[]).push(value);
    // Defined, not assigned: a key named __proto__ is data.
    else Object.defineProperty(parent, key, { value, enumerable: true, writable: true, configurable: true });
    if (kind === KIND.ARRAY || kind === KIND.OBJECT) open.push(value as XenValue[] | Record<string, XenValue>);
  }
  return root as XenValue[];
}

let worker: Worker | undefined;
let idleTimer: NodeJS.Timeout | undefined;
/** Bodies go to the worker one at a time. */
let queue: Promise<unknown> = Promise.resolve();

function stopWorker(): void {
  void worker?.terminate();
  worker = undefined;
}

function runInWorker(request: ParseRequest): Promise<ParseAnswer> {
  clearTimeout(idleTimer);
  const current = (worker ??= new Worker(new URL("./call-parser-worker.ts", import.meta.url), {
    resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
  }));
  // Held only while it parses: an idle worker keeps no process alive.
  current.ref();
  return new Promise<ParseAnswer>((resolve, reject) => {
    const settle = (outcome: () => void) => {
      current.off("message", answered).off("error", failed).off("exit", exited).unref();
      idleTimer = setTimeout(stopWorker, IDLE_MS).unref();
      outcome();
    };
    const answered = (answer: ParseAnswer) => settle(() => resolve(answer));
    // Out of its heap (ERR_WORKER_OUT_OF_MEMORY) or a bug: this body fails, the next gets a new worker.
    const failed = (error: Error) => {
      if (worker === current) worker = undefined;
      settle(() => reject(error));
    };
    const exited = (code: number) => failed(new Error(`the body parser exited with code ${code}`));
    current.on("message", answered).on("error", failed).on("exit", exited);
    // Chunks with a memory of their own are moved, not copied (they are not read here again); others are copied.
    const own = request.chunks.filter((chunk) => chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength);
    current.postMessage(request, own.map((chunk) => chunk.buffer as ArrayBuffer));
  });
}

function parseInWorker(request: ParseRequest): Promise<ParseAnswer> {
  const answer = queue.then(() => runInWorker(request));
  queue = answer.catch(() => undefined);
  return answer;
}

const size = (chunks: Buffer[]) => chunks.reduce((sum, chunk) => sum + chunk.length, 0);

/** A JSON-RPC request from its body's chunks (which a worker may take: not to be read after). */
export async function parseJsonRpcBody(chunks: Buffer[], limits: ShapeLimits): Promise<JsonRpcCall> {
  if (size(chunks) <= INLINE_MAX_BYTES) return parseJsonRpcCall(Buffer.concat(chunks).toString("utf8"), limits);
  const answer = await parseInWorker({ protocol: "json", chunks, limits });
  if ("refused" in answer) {
    const { rpcCode, message, id, version } = answer.refused;
    throw new JsonRpcRequestError(rpcCode!, message, id, version);
  }
  return { ...(answer.call as Omit<JsonRpcCall, "params">), params: await unflatten(answer.params) };
}

/** An XML-RPC methodCall from its body's chunks (which a worker may take: not to be read after). */
export async function parseXmlRpcBody(chunks: Buffer[], limits: ShapeLimits): Promise<XmlRpcCall> {
  if (size(chunks) <= INLINE_MAX_BYTES) return parseXmlRpcCall(Buffer.concat(chunks).toString("utf8"), limits);
  const answer = await parseInWorker({ protocol: "xml", chunks, limits });
  if ("refused" in answer) throw new XmlRpcParseError(answer.refused.message);
  return { method: answer.call!.method, params: await unflatten(answer.params) };
}

/**
 * One XML-RPC value from a document's bytes (which the worker takes: not to be read after), an archive's
 * `ova.xml`: always in the worker, whatever its size. Nobody waits on it as on a call, and imports start in
 * bursts: 50 at once parsed their few-KiB documents inline back to back (1.6–4 ms each) while reads waited.
 */
export async function parseXmlRpcValueBody(chunks: Buffer[], limits: ShapeLimits): Promise<XenValue> {
  const answer = await parseInWorker({ protocol: "xml-value", chunks, limits });
  if ("refused" in answer) throw new XmlRpcParseError(answer.refused.message);
  return (await unflatten(answer.params))[0]!;
}
