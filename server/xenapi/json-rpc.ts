// JSON-RPC as XenAPI speaks it at POST /jsonrpc: 1.0 framing ({method, params, id} → {result, error, id}) and
// 2.0 framing ({jsonrpc: "2.0", …} → {jsonrpc, result | error, id}); errors as
// {code, message: <XenAPI error code>, data: [params]}.
import { type BodyShape, exceededLimit, type ShapeLimits } from "./body-limits.ts";
import type { XenApiError } from "./errors.ts";
import type { XenValue } from "./values.ts";

export interface JsonRpcCall {
  version: "1.0" | "2.0";
  method: string;
  params: XenValue[];
  id: unknown;
}

/** JSON-RPC's own codes for requests that never reach a method. */
export const JSON_RPC_PARSE_ERROR = -32700;
export const JSON_RPC_INVALID_REQUEST = -32600;
/** The code of every XenAPI error (the error's name travels in `message`). */
const XENAPI_ERROR = 1;

export class JsonRpcRequestError extends Error {
  readonly rpcCode: number;
  readonly id: unknown;
  readonly version: "1.0" | "2.0";
  constructor(rpcCode: number, message: string, id: unknown = null, version: "1.0" | "2.0" = "2.0") {
    super(message);
    this.rpcCode = rpcCode;
    this.id = id;
    this.version = version;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/**
 * Values and the deepest nesting of arrays and objects in a JSON text, counted by one pass over its characters
 * (object keys are not values). Only a string right before a colon is taken back as a key, so text that is
 * not JSON can never count fewer values than JSON.parse builds before it fails.
 */
function jsonShape(text: string): BodyShape {
  let values = 0;
  let depth = 0;
  let deepest = 0;
  let inString = false;
  let escaped = false;
  let inLiteral = false;
  let afterString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (escaped) escaped = false;
      else if (c === BACKSLASH) escaped = true;
      else if (c === QUOTE) inString = false;
      continue;
    }
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
      inLiteral = false;
      continue;
    }
    const key = c === COLON && afterString;
    afterString = false;
    if (c === QUOTE) {
      values++;
      inString = true;
      afterString = true;
      inLiteral = false;
    } else if (c === 0x5b /* [ */ || c === 0x7b /* { */) {
      values++;
      deepest = Math.max(deepest, ++depth);
      inLiteral = false;
    } else if (c === 0x5d /* ] */ || c === 0x7d /* } */) {
      depth--;
      inLiteral = false;
    } else if (c === COLON || c === 0x2c /* , */) {
      if (key) values--;
      inLiteral = false;
    } else if (!inLiteral) {
      // true, false, null or a number (or junk, where JSON.parse stops)
      values++;
      inLiteral = true;
    }
  }
  return { values, depth: deepest };
}

/** The words of the first limit a JSON text exceeds, else undefined. */
export function jsonOverLimits(text: string, limits: ShapeLimits): string | undefined {
  return exceededLimit(jsonShape(text), limits, "arrays and objects");
}

/** A request's first tokens, as a peek reads them: strings (up to 1 KiB) decoded, else marks (punctuation, literals). */
function* peekTokens(text: string): Generator<string | { mark: string }> {
  const token = /\s*(?:("(?:[^"\\]|\\.){0,1024}")|([{}[\]:,]|[-+.\w]{1,64}))/y;
  for (let match = token.exec(text); match !== null; match = token.exec(text)) {
    if (match[2] !== undefined) yield { mark: match[2] };
    else {
      try {
        yield JSON.parse(match[1]!) as string;
      } catch {
        return;
      }
    }
  }
}

const isMark = (token: unknown, mark: string) => typeof token === "object" && token !== null && (token as { mark: string }).mark === mark;

/**
 * The method and the first parameter of a request, read from its first bytes when they hold them: `method`
 * must come before `params` and the members before them must be short, as xen-api ({id, jsonrpc, method,
 * params}), XenCenter and Python's clients send them.
 */
export function peekJsonRpcCall(prefix: string): { method: string; first: string } | undefined {
  const tokens = peekTokens(prefix);
  const next = () => tokens.next().value;
  if (!isMark(next(), "{")) return undefined;
  let method: unknown;
  for (;;) {
    const name = next();
    if (typeof name !== "string" || !isMark(next(), ":")) return undefined;
    const value = next();
    if (name === "params") {
      const first = isMark(value, "[") ? next() : undefined;
      return typeof method === "string" && typeof first === "string" ? { method, first } : undefined;
    }
    if (value === undefined || isMark(value, "{") || isMark(value, "[")) return undefined;
    if (name === "method") method = value;
    if (!isMark(next(), ",")) return undefined;
  }
}

/** A request; `limits` (when given) are checked on the text before it is parsed. */
export function parseJsonRpcCall(body: string, limits?: ShapeLimits): JsonRpcCall {
  const over = limits === undefined ? undefined : jsonOverLimits(body, limits);
  if (over !== undefined) throw new JsonRpcRequestError(JSON_RPC_INVALID_REQUEST, over);
  let request: unknown;
  try {
    request = JSON.parse(body);
  } catch (error) {
    throw new JsonRpcRequestError(JSON_RPC_PARSE_ERROR, `request is not JSON: ${(error as Error).message}`);
  }
  if (request === null || typeof request !== "object" || Array.isArray(request)) {
    throw new JsonRpcRequestError(JSON_RPC_INVALID_REQUEST, "a request is one JSON object (batches are not supported)");
  }
  const { jsonrpc, method, params, id } = request as Record<string, unknown>;
  const version = jsonrpc === "2.0" ? "2.0" : "1.0";
  // Checked before anything runs: an id is echoed in the answer, and one that cannot be (a structure nested
  // thousands deep) would fail only after the call had done its work.
  if (id !== undefined && id !== null && typeof id !== "string" && typeof id !== "number") {
    throw new JsonRpcRequestError(JSON_RPC_INVALID_REQUEST, "id must be a string, a number or null", null, version);
  }
  if (typeof method !== "string" || method === "") throw new JsonRpcRequestError(JSON_RPC_INVALID_REQUEST, "method must be a string", id ?? null, version);
  if (params !== undefined && !Array.isArray(params)) {
    throw new JsonRpcRequestError(JSON_RPC_INVALID_REQUEST, "params must be an array", id ?? null, version);
  }
  return { version, method, params: (params ?? []) as XenValue[], id: id ?? null };
}

export function formatJsonRpcResult(call: Pick<JsonRpcCall, "version" | "id">, result: XenValue): string {
  return JSON.stringify(call.version === "2.0" ? { jsonrpc: "2.0", result, id: call.id } : { result, error: null, id: call.id });
}

function errorResponse(version: "1.0" | "2.0", id: unknown, error: { code: number; message: string; data: unknown }): string {
  return JSON.stringify(version === "2.0" ? { jsonrpc: "2.0", error, id } : { result: null, error, id });
}

export function formatJsonRpcError(call: Pick<JsonRpcCall, "version" | "id">, error: XenApiError): string {
  return errorResponse(call.version, call.id, { code: XENAPI_ERROR, message: error.code, data: error.params });
}

export function formatJsonRpcRequestError(error: JsonRpcRequestError): string {
  return errorResponse(error.version, error.id, { code: error.rpcCode, message: error.message, data: [] });
}
