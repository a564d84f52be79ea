// JSON-RPC framing as XenAPI's clients use it at POST /jsonrpc: xen-api and XenCenter send 2.0, older
// SDKs 1.0; a XenAPI error travels as {code, message: <error code>, data: [params]}.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { BEFORE_SESSION } from "./body-limits.ts";
import { XenApiError } from "./errors.ts";
import {
  formatJsonRpcError,
  formatJsonRpcRequestError,
  formatJsonRpcResult,
  JSON_RPC_INVALID_REQUEST,
  JSON_RPC_PARSE_ERROR,
  jsonOverLimits,
  JsonRpcRequestError,
  parseJsonRpcCall,
  peekJsonRpcCall,
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

describe("JSON-RPC request limits", () => {
  const limits = (maxValues: number, maxDepth = 64) => ({ maxValues, maxDepth });

  test("values are counted as JSON.parse builds them: keys aside, whatever strings hold", () => {
    // The object, "m", the array, 1, "a", true, null, the inner object, "[{:\"" and -2.5e3: 10 values.
    const body = '{"method":"m","params":[1, "a",true,null,{"k[{:\\"":"[{:\\"" , "n": -2.5e3}]}';
    assert.equal(jsonOverLimits(body, limits(10)), undefined);
    assert.equal(jsonOverLimits(body, limits(9)), "more than 9 values");
    assert.deepEqual(parseJsonRpcCall(body, limits(10)).params[4], { 'k[{:"': '[{:"', n: -2500 });
  });

  test("depth counts arrays and objects, the request itself included", () => {
    const body = '{"method":"m","params":[[{"a":[]}]]}';
    assert.equal(jsonOverLimits(body, limits(100, 5)), undefined);
    assert.equal(jsonOverLimits(body, limits(100, 4)), "nesting deeper than 4 arrays and objects");
  });

  test("limits are checked before parsing: a text over them is refused as such (-32600), in words, even when not JSON", () => {
    const refused = (body: string, words: string) =>
      assert.throws(() => parseJsonRpcCall(body, limits(1000, 64)), (error) => error instanceof JsonRpcRequestError && error.rpcCode === JSON_RPC_INVALID_REQUEST && error.message === words);
    refused(`{"method":"m","params":${"[".repeat(100_000)}`, "nesting deeper than 64 arrays and objects");
    refused(`[${"[],".repeat(5000)}`, "more than 1000 values");
    // Colons after the values cannot take them back: only a string right before a colon is a key.
    refused(`[${"1,".repeat(1001)}${":".repeat(5000)}`, "more than 1000 values");
    assert.throws(() => parseJsonRpcCall(`{"method":"m","params":[1,2]`, limits(1000)), (error) => error instanceof JsonRpcRequestError && error.rpcCode === JSON_RPC_PARSE_ERROR);
  });

  test("before a session the refusal says so", () => {
    assert.equal(
      jsonOverLimits(`[${"1,".repeat(1000)}1]`, BEFORE_SESSION),
      "more than 1000 values without a live session as the first parameter (login and system.* calls get no more)",
    );
  });
});

describe("JSON-RPC peek", () => {
  test("the method and the first parameter, from the first bytes of a request as clients order it", () => {
    const wanted = { method: "VM.set_other_config", first: "OpaqueRef:s" };
    // xen-api (json-rpc-protocol's format.request), cut short as a peek sees it
    assert.deepEqual(peekJsonRpcCall('{"id":0,"jsonrpc":"2.0","method":"VM.set_other_config","params":["OpaqueRef:s","OpaqueRef:vm",{"k'), wanted);
    // XenCenter (its id, method and params, then jsonrpc), and Python's json.dumps with spaces
    assert.deepEqual(peekJsonRpcCall('{"id": 1, "method": "VM.set_other_config", "params": ["OpaqueRef:s"], "jsonrpc": "2.0"}'), wanted);
    assert.deepEqual(peekJsonRpcCall('{ "jsonrpc" : "2.0" ,\n "method" : "VM.set_other_\\u0063onfig", "params" : [ "OpaqueRef:s" ]'), wanted);
  });

  test("what it cannot read from the first bytes is no peek", () => {
    for (const prefix of [
      '{"params":["OpaqueRef:s"],"method":"VM.get_all"}',
      '{"id":{"nested":1},"method":"m","params":["OpaqueRef:s"]}',
      `{"id":"${"x".repeat(2000)}","method":"m","params":["OpaqueRef:s"]}`,
      '{"method":"m","params":[["OpaqueRef:s"]]}',
      '{"method":"m","params":["OpaqueRef:s',
      '{"method":"m","params":"OpaqueRef:s"}',
      '{"method":"bad \\x","params":["OpaqueRef:s"]}',
      '["m", "OpaqueRef:s"]',
      "",
    ]) {
      assert.equal(peekJsonRpcCall(prefix), undefined, prefix);
    }
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
