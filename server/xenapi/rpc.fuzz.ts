// Fuzz targets (issue 22): the two wire forms' request parsers in-process. Whatever the body, parsing answers
// a well-typed call or fails with the codec's own error (XmlRpcParseError, JsonRpcRequestError with a JSON-RPC
// code), and the answer to that failure can be written. A call written by our encoder parses back to the same
// values, up to what XML-RPC cannot carry (int64 as untyped text, nil as "", control characters).
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget, xenString } from "../fuzz-testing.ts";
import { formatJsonRpcRequestError, formatJsonRpcResult, JSON_RPC_INVALID_REQUEST, JSON_RPC_PARSE_ERROR, JsonRpcRequestError, parseJsonRpcCall } from "./json-rpc.ts";
import { anyParams, jsonRpcBody, xmlRpcBody } from "./rpc-fuzz-testing.ts";
import { XEN_DATE, XenDouble, type XenValue } from "./values.ts";
import { formatXmlRpcCall, formatXmlRpcFailure, parseXmlRpcCall, XmlRpcParseError } from "./xml-rpc.ts";

const BUDGET: FuzzBudget = { slice: 300, full: 30_000, fullSeconds: 20, caseMs: 2000 };

const anyCall = { method: xenString, params: anyParams };

/** Whether `value` is a XenValue as the toolstack's calls may receive it. */
function isXenValue(value: unknown): boolean {
  if (value === null || typeof value === "string" || typeof value === "boolean") return true;
  if (typeof value === "number") return Number.isFinite(value);
  if (value instanceof XenDouble) return Number.isFinite(value.value);
  if (Array.isArray(value)) return value.every(isXenValue);
  return typeof value === "object" && Object.values(value).every(isXenValue);
}

test("XML-RPC: any body parses to a call of XenValues or fails with XmlRpcParseError", async (t) => {
  await fuzz(t, "xml-rpc parse", BUDGET, xmlRpcBody(anyCall), (body) => {
    let call;
    try {
      call = parseXmlRpcCall(body);
    } catch (error) {
      if (!(error instanceof XmlRpcParseError)) throw error;
      formatXmlRpcFailure(["XMLRPC_UNMARSHAL_FAILURE", error.message]);
      return;
    }
    assert.ok(typeof call.method === "string" && call.method !== "" && call.method === call.method.trim(), `method ${JSON.stringify(call.method)}`);
    assert.ok(call.params.every(isXenValue), "every parameter is a XenValue");
  });
});

/** XML 1.0 cannot carry these: the encoder drops them, as xapi does. */
const UNCARRIED = /[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/g;

const carried = (text: string) => text.replace(UNCARRIED, "");

/** What a value becomes through XML-RPC: whole numbers and nil as untyped text, uncarried characters dropped. */
function throughXmlRpc(value: XenValue): XenValue {
  if (value === null) return "";
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return XEN_DATE.test(value) ? value : carried(value);
  if (value instanceof XenDouble) return new XenDouble(value.value === 0 ? 0 : value.value);
  if (typeof value === "boolean") return value;
  if (Array.isArray(value)) return value.map(throughXmlRpc);
  const out: Record<string, XenValue> = {};
  for (const [name, member] of Object.entries(value)) Object.defineProperty(out, carried(name), { value: throughXmlRpc(member), enumerable: true, writable: true, configurable: true });
  return out;
}

test("XML-RPC: a call our encoder writes parses back to its values", async (t) => {
  const method = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_.]{0,30}$/);
  await fuzz(t, "xml-rpc round trip", BUDGET, fc.tuple(method, anyParams), ([name, params]) => {
    assert.deepStrictEqual(parseXmlRpcCall(formatXmlRpcCall(name, params)), { method: name, params: params.map(throughXmlRpc) });
  });
});

test("JSON-RPC: any body parses to a call or fails with JsonRpcRequestError, and either answer can be written", async (t) => {
  await fuzz(t, "json-rpc parse", BUDGET, jsonRpcBody(anyCall), (body) => {
    let call;
    try {
      call = parseJsonRpcCall(body);
    } catch (error) {
      if (!(error instanceof JsonRpcRequestError)) throw error;
      assert.ok(error.rpcCode === JSON_RPC_PARSE_ERROR || error.rpcCode === JSON_RPC_INVALID_REQUEST, `code ${error.rpcCode}`);
      JSON.parse(formatJsonRpcRequestError(error));
      return;
    }
    assert.ok(call.version === "1.0" || call.version === "2.0");
    assert.ok(typeof call.method === "string" && call.method !== "");
    assert.ok(Array.isArray(call.params));
    assert.ok(call.id === null || typeof call.id === "string" || typeof call.id === "number", `id ${typeof call.id}`);
    JSON.parse(formatJsonRpcResult(call, ""));
  });
});
