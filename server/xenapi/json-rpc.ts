// JSON-RPC as XenAPI speaks it at POST /jsonrpc: 1.0 framing ({method, params, id} → {result, error, id}) and
// 2.0 framing ({jsonrpc: "2.0", …} → {jsonrpc, result | error, id}); errors as
// {code, message: <XenAPI error code>, data: [params]}.
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

export function parseJsonRpcCall(body: string): JsonRpcCall {
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
