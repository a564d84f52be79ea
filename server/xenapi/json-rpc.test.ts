// JSON-RPC framing as XenAPI's clients use it at POST /jsonrpc: xen-api and XenCenter send 2.0, older
// SDKs 1.0; a XenAPI error travels as {code, message: <error code>, data: [params]}.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { XenApiError } from "./errors.ts";
import {
  formatJsonRpcError,
  formatJsonRpcRequestError,
  formatJsonRpcResult,
  JSON_RPC_INVALID_REQUEST,
  JSON_RPC_PARSE_ERROR,
  JsonRpcRequestError,
  parseJsonRpcCall,
} from "./json-rpc.ts";
import { XenDouble } from "./values.ts";

describe("JSON-RPC requests", () => {
  test("2.0 framing, as xen-api sends it", () => {
    const call = parseJsonRpcCall('{"jsonrpc":"2.0","method":"session.login_with_password","params":["root","pw"],"id":0}');
    assert.deepEqual(call, { version: "2.0", method: "session.login_with_password", params: ["root", "pw"], id: 0 });
  });

  test("1.0 framing: no jsonrpc member (or another value) is 1.0", () => {
    assert.deepEqual(parseJsonRpcCall('{"method":"pool.get_all","params":["OpaqueRef:s"],"id":"a"}'), {
      version: "1.0",
      method: "pool.get_all",
      params: ["OpaqueRef:s"],
      id: "a",
    });
    assert.equal(parseJsonRpcCall('{"jsonrpc":"1.0","method":"m","id":1}').version, "1.0");
  });

  test("params left out are none; a missing id is null", () => {
    assert.deepEqual(parseJsonRpcCall('{"jsonrpc":"2.0","method":"system.listMethods"}'), { version: "2.0", method: "system.listMethods", params: [], id: null });
  });

  test("values keep their JSON types (numbers, booleans, nested structs)", () => {
    const call = parseJsonRpcCall('{"jsonrpc":"2.0","method":"m","params":[1,2.5,true,null,{"a":["b"]},"10737418240"],"id":7}');
    assert.deepEqual(call.params, [1, 2.5, true, null, { a: ["b"] }, "10737418240"]);
  });

  test("malformed requests: not JSON is a parse error; not an object, a batch, no method or object params are invalid", () => {
    const refused = (body: string, code: number, id: unknown = null) =>
      assert.throws(() => parseJsonRpcCall(body), (error: unknown) => error instanceof JsonRpcRequestError && error.rpcCode === code && error.id === id, body);
    refused("", JSON_RPC_PARSE_ERROR);
    refused("{", JSON_RPC_PARSE_ERROR);
    refused("<methodCall/>", JSON_RPC_PARSE_ERROR);
    refused("null", JSON_RPC_INVALID_REQUEST);
    refused('"session.login_with_password"', JSON_RPC_INVALID_REQUEST);
    refused('[{"jsonrpc":"2.0","method":"m","id":1}]', JSON_RPC_INVALID_REQUEST);
    refused('{"jsonrpc":"2.0","params":[],"id":3}', JSON_RPC_INVALID_REQUEST, 3);
    refused('{"jsonrpc":"2.0","method":"","id":3}', JSON_RPC_INVALID_REQUEST, 3);
    refused('{"jsonrpc":"2.0","method":42,"id":3}', JSON_RPC_INVALID_REQUEST, 3);
    refused('{"jsonrpc":"2.0","method":"m","params":{"session":"x"},"id":"q"}', JSON_RPC_INVALID_REQUEST, "q");
  });
});

describe("JSON-RPC responses", () => {
  test("results: 2.0 {jsonrpc, result, id}; 1.0 {result, error: null, id}; floats as numbers", () => {
    assert.deepEqual(JSON.parse(formatJsonRpcResult({ version: "2.0", id: 0 }, { progress: new XenDouble(1) })), { jsonrpc: "2.0", result: { progress: 1 }, id: 0 });
    assert.deepEqual(JSON.parse(formatJsonRpcResult({ version: "1.0", id: "a" }, "OpaqueRef:x")), { result: "OpaqueRef:x", error: null, id: "a" });
  });

  test("XenAPI errors: {code, message: <XenAPI code>, data: [params]} in both framings", () => {
    const error = new XenApiError("HANDLE_INVALID", ["VM", "OpaqueRef:gone"]);
    assert.deepEqual(JSON.parse(formatJsonRpcError({ version: "2.0", id: 4 }, error)), {
      jsonrpc: "2.0",
      error: { code: 1, message: "HANDLE_INVALID", data: ["VM", "OpaqueRef:gone"] },
      id: 4,
    });
    assert.deepEqual(JSON.parse(formatJsonRpcError({ version: "1.0", id: 4 }, error)), {
      result: null,
      error: { code: 1, message: "HANDLE_INVALID", data: ["VM", "OpaqueRef:gone"] },
      id: 4,
    });
  });

  test("requests that never reach a method get JSON-RPC's own codes, their id when known", () => {
    assert.deepEqual(JSON.parse(formatJsonRpcRequestError(new JsonRpcRequestError(JSON_RPC_PARSE_ERROR, "request is not JSON"))), {
      jsonrpc: "2.0",
      error: { code: -32700, message: "request is not JSON", data: [] },
      id: null,
    });
    const invalid = (() => {
      try {
        parseJsonRpcCall('{"method":"m","params":"x","id":9}');
      } catch (error) {
        return error as JsonRpcRequestError;
      }
      throw new Error("accepted");
    })();
    assert.deepEqual(JSON.parse(formatJsonRpcRequestError(invalid)), { result: null, error: { code: -32600, message: "params must be an array", data: [] }, id: 9 });
  });

  test("an id that is not a string, a number or null is an invalid request, refused before the call runs (its own id null)", () => {
    const deep = `${"[".repeat(5000)}${"]".repeat(5000)}`;
    for (const id of ['{"a":1}', "[1]", "true", deep]) {
      assert.throws(
        () => parseJsonRpcCall(`{"jsonrpc":"2.0","method":"task.create","params":[],"id":${id}}`),
        (error: unknown) => error instanceof JsonRpcRequestError && error.rpcCode === -32600 && error.id === null && /id must be/.test(error.message),
      );
    }
    for (const id of ['"abc"', "7", "null"]) assert.equal(parseJsonRpcCall(`{"method":"m","id":${id}}`).id, JSON.parse(id));
  });
});
