// JSON-RPC v1 plugins: a real node:http server answering through handleJsonRpc, reached over TCP and over a
// unix socket, plus raw servers that misbehave in the ways a transport must survive.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type TestContext, describe, test } from "node:test";
import { createPluginClient } from "./client.ts";
import { type PluginImplementation, handleJsonRpc } from "./dispatcher.ts";
import { StorageError, storageErrors } from "./errors.ts";
import { createJsonRpcTransport } from "./jsonrpc-transport.ts";
import type { QueryResult, Volume } from "./types.ts";

const QUERY: QueryResult = {
  plugin: "daemon",
  name: "Daemon plugin",
  description: "served over JSON-RPC",
  vendor: "Hangar tests",
  copyright: "",
  version: "2.0",
  required_api_version: "5.0",
  features: ["SR_SCAN"],
  configuration: {},
  required_cluster_stack: [],
};

const VOLUME: Volume = {
  key: "v1",
  name: "disk",
  description: "",
  read_write: true,
  sharable: false,
  virtual_size: 2 ** 40,
  physical_utilisation: 0,
  uri: ["loop:///srv/v1"],
  keys: {},
  volume_type: "Data",
};

const IMPL: PluginImplementation = {
  "Plugin.query": () => QUERY,
  "SR.ls": ({ sr }) => {
    if (sr !== "file:///srv/sr1") throw storageErrors.srDoesNotExist(sr);
    return [VOLUME];
  },
  "Volume.stat": ({ key }) => {
    throw storageErrors.volumeDoesNotExist(key);
  },
  "Data.copy": async ({ blocklist }) => ["CopyV1", `copy-${blocklist.ranges.length}`],
  "Plugin.diagnostics": () => {
    throw new Error("diagnostics exploded");
  },
};

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;
interface Seen {
  url: string;
  method: string;
  contentType: string | undefined;
  body: string;
}

/** Listens on `where` (0 = a free TCP port, or a socket path) and closes everything after the test. */
async function listen(t: TestContext, handler: Handler, where: number | string = 0): Promise<{ server: Server; url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ url: req.url ?? "", method: req.method ?? "", contentType: req.headers["content-type"], body });
      handler(req, body, res);
    });
  });
  await new Promise<void>((resolve) => (typeof where === "number" ? server.listen(where, "127.0.0.1", resolve) : server.listen(where, resolve)));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const url = typeof where === "string" ? `unix://${where}` : `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return { server, url, seen };
}

const plugin: Handler = (_req, body, res) => {
  void handleJsonRpc(IMPL, body).then((json) => res.writeHead(200, { "content-type": "application/json" }).end(json));
};

const answer =
  (text: string, status = 200): Handler =>
  (_req, _body, res) =>
    res.writeHead(status, { "content-type": "application/json" }).end(text);

async function rejection(promise: Promise<unknown>): Promise<StorageError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof StorageError, `expected a StorageError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

async function socketPath(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hangar-rpc-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return join(dir, "plugin.sock");
}

describe("a plugin served by handleJsonRpc", () => {
  test("over TCP: results come back typed; the request is JSON-RPC v1 with params [object]", async (t) => {
    const { url, seen } = await listen(t, plugin);
    const client = createPluginClient("daemon", createJsonRpcTransport("daemon", { url }));
    assert.equal(client.transport.description, `jsonrpc ${url}`);
    assert.deepEqual(await client.call("Plugin.query", { dbg: "t" }), QUERY);
    assert.deepEqual(await client.call("SR.ls", { dbg: "t", sr: "file:///srv/sr1" }), [VOLUME]);
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.body, '{"method":"Plugin.query","params":[{"dbg":"t"}],"id":1}');
    assert.equal(seen[1]?.body, '{"method":"SR.ls","params":[{"dbg":"t","sr":"file:///srv/sr1"}],"id":2}');
    assert.equal(seen[0]?.method, "POST");
    assert.equal(seen[0]?.contentType, "application/json");
    assert.equal(seen[0]?.url, "/");
  });

  test("over a unix socket (unix:///path)", async (t) => {
    const path = await socketPath(t);
    const { url } = await listen(t, plugin, path);
    assert.equal(url, `unix://${path}`);
    const client = createPluginClient("daemon", createJsonRpcTransport("daemon", { url }));
    assert.deepEqual(await client.call("Plugin.query", { dbg: "t" }), QUERY);
    assert.deepEqual(
      await client.call("Data.copy", { dbg: "t", uri: "loop:///a", domain: "0", remote: "nbd://h/v", blocklist: { blocksize: 512, ranges: [[0, 1], [4, 4]] } }),
      ["CopyV1", "copy-2"],
    );
  });

  test("the URL path and query are kept", async (t) => {
    const { url, seen } = await listen(t, plugin);
    const client = createPluginClient("daemon", createJsonRpcTransport("daemon", { url: `${url}rpc/v1?token=abc` }));
    await client.call("Plugin.query", { dbg: "t" });
    assert.equal(seen[0]?.url, "/rpc/v1?token=abc");
  });

  test("error objects become StorageErrors with their constructor", async (t) => {
    const { url } = await listen(t, plugin);
    const client = createPluginClient("daemon", createJsonRpcTransport("daemon", { url }));
    const missing = await rejection(client.call("Volume.stat", { dbg: "t", sr: "file:///srv/sr1", key: "v9" }));
    assert.equal(missing.code, "SR_BACKEND_FAILURE");
    assert.equal(missing.errorConstructor, "Volume_does_not_exist");
    assert.deepEqual(missing.detail, ["v9"]);
    const noSr = await rejection(client.call("SR.ls", { dbg: "t", sr: "file:///elsewhere" }));
    assert.equal(noSr.errorConstructor, "SR_does_not_exist");
    const thrown = await rejection(client.call("Plugin.diagnostics", { dbg: "t" }));
    assert.equal(thrown.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(thrown.params, ["diagnostics exploded"]);
  });

  test("a method the implementation lacks is Unimplemented", async (t) => {
    const { url } = await listen(t, plugin);
    const client = createPluginClient("daemon", createJsonRpcTransport("daemon", { url }));
    const error = await rejection(client.call("Volume.destroy", { dbg: "t", sr: "s", key: "k" }));
    assert.equal(error.errorConstructor, "Unimplemented");
    assert.deepEqual(error.detail, ["Volume.destroy"]);
    const unknown = await rejection(createJsonRpcTransport("daemon", { url }).invoke("Nope.nothing" as never, '{"dbg":"t"}'));
    assert.equal(unknown.errorConstructor, "Unimplemented");
  });

  test("invalid params are answered with an error naming the field", async (t) => {
    const { url } = await listen(t, plugin);
    const transport = createJsonRpcTransport("daemon", { url });
    const error = await rejection(transport.invoke("SR.ls", '{"dbg":"t"}'));
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.match(error.params[0] ?? "", /^invalid parameters: sr: /);
    const wrongType = await rejection(transport.invoke("Data.copy", '{"dbg":"t","uri":"u","domain":"0","remote":"r","blocklist":{"blocksize":1.0,"ranges":[]}}'));
    assert.match(wrongType.params[0] ?? "", /blocklist\.blocksize: expected int, got 1\.0/);
  });

  test("a result of the wrong type is PLUGIN_RESULT_INVALID", async (t) => {
    const { url } = await listen(t, answer('{"result":{"volumes":[]},"error":null,"id":1}'));
    const error = await rejection(createPluginClient("daemon", createJsonRpcTransport("daemon", { url })).call("SR.ls", { dbg: "t", sr: "s" }));
    assert.equal(error.code, "PLUGIN_RESULT_INVALID");
    assert.deepEqual(error.params.slice(0, 2), ["daemon", "SR.ls"]);
  });
});

describe("handleJsonRpc", () => {
  test("echoes the request id and answers with result or error, never both", async () => {
    assert.equal(await handleJsonRpc(IMPL, '{"method":"SR.ls","params":[{"dbg":"t","sr":"file:///srv/sr1"}],"id":"abc"}'), `{"result":[${JSON.stringify(VOLUME)}],"error":null,"id":"abc"}`);
    const failed = JSON.parse(await handleJsonRpc(IMPL, '{"method":"Volume.stat","params":[{"dbg":"t","sr":"s","key":"k"}],"id":7}'));
    assert.equal(failed.result, null);
    assert.equal(failed.id, 7);
    assert.deepEqual(failed.error.params, ["Volume_does_not_exist", "k"]);
    assert.deepEqual(failed.error.backtrace.files, []);
  });

  test("a body that is not JSON, or a request without params, is answered with an error", async () => {
    const notJson = JSON.parse(await handleJsonRpc(IMPL, "<xml/>"));
    assert.equal(notJson.id, null);
    assert.equal(notJson.result, null);
    assert.equal(notJson.error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(notJson.error.params, ["request is not JSON"]);
    const noParams = JSON.parse(await handleJsonRpc(IMPL, '{"method":"Plugin.query","id":3}'));
    assert.equal(noParams.id, 3);
    assert.match(noParams.error.params[0], /invalid parameters/);
    const notObject = JSON.parse(await handleJsonRpc(IMPL, "42"));
    assert.equal(notObject.id, null);
    assert.deepEqual(notObject.error.params, ["Unimplemented", ""]);
  });

  test("an id is echoed exactly as it was sent, whatever its JSON", async () => {
    for (const id of ["12345678901234567890", "1.0", '"x-1"', "null"]) {
      const answer = await handleJsonRpc(IMPL, `{"method":"Plugin.query","params":[{"dbg":"t"}],"id":${id}}`);
      assert.ok(answer.endsWith(`,"id":${id}}`), answer);
    }
  });

  test("method names are case-insensitive, as script names are", async () => {
    const answer = JSON.parse(await handleJsonRpc(IMPL, '{"method":"plugin.QUERY","params":[{"dbg":"t"}],"id":1}'));
    assert.deepEqual(answer.result, QUERY);
  });
});

describe("transport failures", () => {
  test("an HTML page or other non-JSON-RPC answer is TRANSPORT_FAILED", async (t) => {
    const html = await listen(t, (_req, _body, res) => res.writeHead(404, { "content-type": "text/html" }).end("<h1>Not Found</h1>"));
    const error = await rejection(createJsonRpcTransport("daemon", { url: html.url }).invoke("Plugin.query", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
    assert.deepEqual(error.params.slice(0, 2), ["daemon", "Plugin.query"]);
    assert.match(error.params[2] ?? "", /not a JSON-RPC response: <h1>Not Found<\/h1>/);
    assert.match(error.message, new RegExp(`daemon Plugin\\.query \\(${html.url}\\)`));
    for (const body of ["[1,2]", '"ok"', "null", ""]) {
      const weird = await listen(t, answer(body));
      const failure = await rejection(createJsonRpcTransport("daemon", { url: weird.url }).invoke("Plugin.query", '{"dbg":"t"}'));
      assert.equal(failure.code, "TRANSPORT_FAILED", body);
    }
  });

  test("a response id that does not match the request id", async (t) => {
    const { url } = await listen(t, answer('{"result":[],"error":null,"id":999}'));
    const error = await rejection(createJsonRpcTransport("daemon", { url }).invoke("Plugin.ls", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
    assert.match(error.message, /response id 999 does not match request id 1/);
    const missingId = await listen(t, answer('{"result":[],"error":null}'));
    assert.equal((await rejection(createJsonRpcTransport("daemon", { url: missingId.url }).invoke("Plugin.ls", '{"dbg":"t"}'))).code, "TRANSPORT_FAILED");
  });

  test("an error that is not an error object still fails the call", async (t) => {
    const { url } = await listen(t, answer('{"result":null,"error":"internal failure","id":1}'));
    const error = await rejection(createJsonRpcTransport("daemon", { url }).invoke("Plugin.ls", '{"dbg":"t"}'));
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params, ["internal failure"]);
  });

  test("an unreachable TCP endpoint is TRANSPORT_FAILED", async (t) => {
    const { server, url } = await listen(t, plugin);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const error = await rejection(createJsonRpcTransport("daemon", { url }).invoke("Plugin.query", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
    assert.match(error.params[2] ?? "", /ECONNREFUSED/);
  });

  test("a unix socket that does not exist is TRANSPORT_FAILED", async (t) => {
    const path = await socketPath(t);
    const error = await rejection(createJsonRpcTransport("daemon", { url: `unix://${path}` }).invoke("Plugin.query", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
    assert.match(error.params[2] ?? "", /ENOENT/);
  });

  test("a server that never answers times out", async (t) => {
    const { url } = await listen(t, () => {});
    const started = Date.now();
    const error = await rejection(createJsonRpcTransport("daemon", { url, timeoutMs: 300 }).invoke("Plugin.query", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
    assert.match(error.params[2] ?? "", /no answer within 0\.3 s/);
    assert.ok(Date.now() - started < 3000);
  });

  test("a server that stops halfway through the body times out too", async (t) => {
    const { url } = await listen(t, (_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"result":');
    });
    const error = await rejection(createJsonRpcTransport("daemon", { url, timeoutMs: 300 }).invoke("Plugin.query", '{"dbg":"t"}'));
    assert.equal(error.code, "TRANSPORT_FAILED");
  });

  test("an endpoint that is neither http:// nor unix:// is refused up front", () => {
    assert.throws(() => createJsonRpcTransport("daemon", { url: "ftp://example.com/rpc" }), /unsupported JSON-RPC endpoint ftp:\/\/example\.com\/rpc/);
    assert.throws(() => createJsonRpcTransport("daemon", { url: "not a url" }));
  });
});
