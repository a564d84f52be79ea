// Bad input and faults over real HTTP: each answered with its XenAPI (or HTTP) error, and the service
// serves the next request as before.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test, type TestContext } from "node:test";
import { poolCalls } from "./calls/pool.ts";
import { ROOT_PASSWORD, serveTestToolstack } from "./testing.ts";
import type { ServeOptions } from "./serve.ts";
import { collectGarbage, longestStep } from "../event-loop-testing.ts";
import type { XenValue } from "../xenapi/values.ts";
import { formatXmlRpcCall, parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

interface Reply {
  status: number;
  type: string;
  text: string;
}

async function post(url: string, body: BodyInit, headers: Record<string, string>): Promise<Reply> {
  // A large body goes in 64 KiB pieces, as a client's socket sends it: fetch copies a Buffer body whole on this
  // thread first (100 ms for 16 MiB), which a measure of the service's steps, made here too, would count.
  if (Buffer.isBuffer(body) && body.length > 64 * 1024) {
    const whole = body;
    body = (async function* () {
      for (let at = 0; at < whole.length; at += 64 * 1024) yield whole.subarray(at, at + 64 * 1024);
    })() as unknown as BodyInit;
    headers = { ...headers, "content-length": String(whole.length) };
  }
  const response = await fetch(url, { method: "POST", body, headers, duplex: "half" } as RequestInit);
  return { status: response.status, type: response.headers.get("content-type") ?? "", text: await response.text() };
}

/** A JSON-RPC 2.0 call; answers the parsed response. */
async function jsonRpc(base: string, method: string, params: unknown[]): Promise<{ result?: unknown; error?: { code: number; message: string; data: unknown[] } }> {
  const reply = await post(`${base}jsonrpc`, JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 }), { "content-type": "application/json" });
  assert.equal(reply.status, 200);
  assert.equal(reply.type, "application/json");
  return JSON.parse(reply.text) as never;
}


/** The struct an XML-RPC response holds ({Status, Value} or {Status, ErrorDescription}). */
function xmlResponse(reply: Reply): Record<string, XenValue> {
  assert.equal(reply.status, 200);
  assert.equal(reply.type, "text/xml");
  const inner = /^<\?xml version="1.0"\?><methodResponse><params><param>(.*)<\/param><\/params><\/methodResponse>$/s.exec(reply.text);
  assert.ok(inner, reply.text);
  return parseXmlRpcValue(inner[1]!) as Record<string, XenValue>;
}

const xmlRpc = async (base: string, method: string, params: XenValue[]) => xmlResponse(await post(base, formatXmlRpcCall(method, params), { "content-type": "text/xml" }));

async function serve(t: TestContext, options: Partial<ServeOptions> = {}) {
  const { url } = await serveTestToolstack(t, options);
  /** A new session over JSON-RPC: proof the service still serves. */
  const login = async () => {
    const { result } = await jsonRpc(url, "session.login_with_password", ["root", ROOT_PASSWORD]);
    assert.match(String(result), /^OpaqueRef:/);
    return String(result);
  };
  return { url, login };
}

const MiB = 1024 * 1024;
/** HANGAR_API_MAX_BODY as large as the cases (16 MiB; the default is 2 MiB). */
const LARGE_BODIES: Partial<ServeOptions> = { maxApiBody: 16 * MiB };

describe("toolstack HTTP: bad input and faults", { concurrency: true }, () => {
  test("malformed JSON is a JSON-RPC parse error (-32700); malformed XML a Failure XMLRPC_UNMARSHAL_FAILURE", async (t) => {
    const { url, login } = await serve(t);
    for (const body of ["{", '{"method": "session.login_with_password", "params": [', "\u0000\u00ff", ""]) {
      const reply = await post(`${url}jsonrpc`, body, { "content-type": "application/json" });
      assert.equal(reply.status, 200);
      assert.deepEqual(JSON.parse(reply.text).error.code, -32700, body);
    }
    const invalid = JSON.parse((await post(`${url}jsonrpc`, "[1,2]", { "content-type": "application/json" })).text);
    assert.equal(invalid.error.code, -32600);
    for (const body of ["<methodCall>", "not xml", "<methodCall><methodName>a</methodName><params><param><value><i4>x</i4></value></param></params></methodCall>", ""]) {
      const failure = xmlResponse(await post(url, body, { "content-type": "text/xml" }));
      assert.equal(failure.Status, "Failure");
      assert.equal((failure.ErrorDescription as string[])[0], "XMLRPC_UNMARSHAL_FAILURE", body);
    }
    await login();
  });

  test("a 100 MB body is 413 on both endpoints, declared or chunked; the service keeps serving", async (t) => {
    const { url, login } = await serve(t);
    const big = Buffer.alloc(100 * MiB, 0x20);
    const chunked = () =>
      new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < big.length; offset += MiB) controller.enqueue(big.subarray(offset, offset + MiB));
          controller.close();
        },
      });
    for (const [path, type] of [
      ["jsonrpc", "application/json"],
      ["", "text/xml"],
    ] as const) {
      assert.equal((await post(`${url}${path}`, big, { "content-type": type })).status, 413);
      assert.equal((await post(`${url}${path}`, chunked(), { "content-type": type })).status, 413);
      await login();
    }
    // A limit set lower is the one applied; a body just under it is served.
    const small = await serve(t, { maxApiBody: 1024 });
    const padded = JSON.stringify({ jsonrpc: "2.0", method: "session.login_with_password", params: ["root", ROOT_PASSWORD], id: 1 }).padEnd(1024, " ");
    assert.equal((await post(`${small.url}jsonrpc`, padded, { "content-type": "application/json" })).status, 200);
    assert.equal((await post(`${small.url}jsonrpc`, `${padded} `, { "content-type": "application/json" })).status, 413);
    await small.login();
  });

  test("deep nesting: 100,000 levels of JSON or XML are refused without harm", async (t) => {
    const { url, login } = await serve(t, LARGE_BODIES);
    const session = await login();
    const depth = 100_000;
    const deepJson = `{"jsonrpc":"2.0","method":"event.from","params":["${session}",${"[".repeat(depth)}${"]".repeat(depth)},"",0],"id":1}`;
    const reply = JSON.parse((await post(`${url}jsonrpc`, deepJson, { "content-type": "application/json" })).text);
    assert.deepEqual(reply.error, { code: -32600, message: "nesting deeper than 64 arrays and objects", data: [] });
    const deepXml = formatXmlRpcCall("event.from", [session]).replace(
      "</params>",
      `<param>${"<value><array><data>".repeat(depth)}${"</data></array></value>".repeat(depth)}</param></params>`,
    );
    const failure = xmlResponse(await post(url, deepXml, { "content-type": "text/xml" }));
    assert.deepEqual(failure.ErrorDescription, ["XMLRPC_UNMARSHAL_FAILURE", "nesting deeper than 64 elements"]);
    await login();
  });

  test("wrong types are FIELD_TYPE_ERROR naming the field, over both wire forms", async (t) => {
    const { url, login } = await serve(t);
    const session = await login();
    const json = await jsonRpc(url, "event.from", [session, "task", "", 0]);
    assert.deepEqual(json.error, { code: 1, message: "FIELD_TYPE_ERROR", data: ["classes"] });
    assert.deepEqual((await jsonRpc(url, "event.from", [session, ["task"], "", "soon"])).error?.data, ["timeout"]);
    assert.deepEqual((await jsonRpc(url, "task.get_record", [session, "not-a-ref"])).error, { code: 1, message: "FIELD_TYPE_ERROR", data: ["self"] });
    assert.deepEqual((await jsonRpc(url, "session.login_with_password", [1, 2])).error?.message, "FIELD_TYPE_ERROR");
    const xml = await xmlRpc(url, "task.create", [session, { label: "x" }, "description"]);
    assert.deepEqual(xml, { Status: "Failure", ErrorDescription: ["FIELD_TYPE_ERROR", "label"] });
    await login();
  });

  test("unknown methods are MESSAGE_METHOD_UNKNOWN; wrong parameter counts MESSAGE_PARAMETER_COUNT_MISMATCH", async (t) => {
    const { url, login } = await serve(t);
    const session = await login();
    assert.deepEqual((await jsonRpc(url, "VM.make_coffee", [session])).error, { code: 1, message: "MESSAGE_METHOD_UNKNOWN", data: ["VM.make_coffee"] });
    assert.deepEqual((await jsonRpc(url, "Async.task.get_record", [session, "OpaqueRef:x"])).error?.message, "MESSAGE_METHOD_UNKNOWN");
    assert.deepEqual(await xmlRpc(url, "no_dot_at_all", []), { Status: "Failure", ErrorDescription: ["MESSAGE_METHOD_UNKNOWN", "no_dot_at_all"] });
    assert.deepEqual((await jsonRpc(url, "task.get_record", [session])).error, {
      code: 1,
      message: "MESSAGE_PARAMETER_COUNT_MISMATCH",
      data: ["task.get_record", "2", "1"],
    });
    assert.deepEqual(await xmlRpc(url, "task.create", [session, "a", "b", "c"]), {
      Status: "Failure",
      ErrorDescription: ["MESSAGE_PARAMETER_COUNT_MISMATCH", "task.create", "3", "4"],
    });
    assert.deepEqual((await jsonRpc(url, "system.listMethods", [session, "extra"])).error?.message, "MESSAGE_PARAMETER_COUNT_MISMATCH");
    assert.ok(Array.isArray((await jsonRpc(url, "system.listMethods", [session])).result), "with a session, as xen-api's call() asks");
    await login();
  });

  test("a wrong, logged-out or expired session is SESSION_INVALID over both wire forms", async (t) => {
    // A timeout long enough for a login and a call on a busy machine (this file's other tests run beside it).
    const { url, login } = await serve(t, { sessionTimeoutMs: 1000 });
    assert.deepEqual((await jsonRpc(url, "task.get_all", ["OpaqueRef:wrong"])).error, { code: 1, message: "SESSION_INVALID", data: ["OpaqueRef:wrong"] });
    assert.deepEqual(await xmlRpc(url, "task.get_all", ["OpaqueRef:wrong"]), { Status: "Failure", ErrorDescription: ["SESSION_INVALID", "OpaqueRef:wrong"] });
    const out = await login();
    await jsonRpc(url, "session.logout", [out]);
    assert.equal((await jsonRpc(url, "task.get_all", [out])).error?.message, "SESSION_INVALID");
    const idle = await login();
    assert.deepEqual((await jsonRpc(url, "task.get_all", [idle])).result, []);
    await sleep(1200);
    assert.deepEqual((await jsonRpc(url, "task.get_all", [idle])).error, { code: 1, message: "SESSION_INVALID", data: [idle] });
    const wrongPassword = await xmlRpc(url, "session.login_with_password", ["root", "guess"]);
    assert.deepEqual(wrongPassword, { Status: "Failure", ErrorDescription: ["SESSION_AUTHENTICATION_FAILED", "root", "Authentication failure"] });
    await login();
  });

  test("/jsonrpc takes application/json only (415 otherwise); other paths and methods are 404", async (t) => {
    const { url, login } = await serve(t);
    const body = JSON.stringify({ jsonrpc: "2.0", method: "system.listMethods", params: [], id: 1 });
    for (const type of ["text/xml", "text/plain", "application/x-www-form-urlencoded", "application/jsonx"]) {
      const reply = await post(`${url}jsonrpc`, body, { "content-type": type });
      assert.equal(reply.status, 415, type);
      assert.match(reply.text, /application\/json/);
    }
    const untyped = await fetch(`${url}jsonrpc`, { method: "POST", body: new Uint8Array(Buffer.from(body)) });
    assert.equal(untyped.status, 415);
    await untyped.body?.cancel();
    assert.equal((await post(`${url}jsonrpc`, body, { "content-type": "application/json; charset=utf-8" })).status, 200);
    assert.equal((await fetch(`${url}jsonrpc`)).status, 404);
    assert.equal((await fetch(url)).status, 404);
    assert.equal((await post(`${url}nowhere`, body, { "content-type": "application/json" })).status, 404);
    // XML-RPC is served at /, /xmlrpc (xen-api) and /RPC2 (Python's default), with or without a trailing slash.
    for (const path of ["", "xmlrpc", "RPC2", "xmlrpc/"]) {
      const reply = xmlResponse(await post(`${url}${path}`, formatXmlRpcCall("system.listMethods", []), { "content-type": "text/xml" }));
      assert.equal(reply.Status, "Success", path);
    }
    await login();
  });

  test("a burst of bad requests mixed with good ones: every good one is answered", async (t) => {
    const { url, login } = await serve(t);
    const session = await login();
    const bad = (i: number) =>
      i % 3 === 0
        ? post(`${url}jsonrpc`, "{", { "content-type": "application/json" })
        : i % 3 === 1
          ? post(url, "<methodCall>", { "content-type": "text/xml" })
          : post(`${url}jsonrpc`, "{}", { "content-type": "text/plain" });
    const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? bad(i) : jsonRpc(url, "task.get_all", [session]))));
    for (const [i, result] of results.entries()) if (i % 2 === 1) assert.deepEqual((result as { result: unknown }).result, []);
    await login();
  });
});

/** A map of `entries` members whose values make it about `bytes` long. */
function bigMap(entries: number, bytes: number): Record<string, string> {
  const value = "v".repeat(Math.max(1, Math.floor(bytes / entries) - 20));
  return Object.fromEntries(Array.from({ length: entries }, (_, i) => [`key${String(i).padStart(6, "0")}`, value]));
}

const jsonBody = (method: string, params: unknown[]) => JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 });
const JSON_TYPE = { "content-type": "application/json" };
const XML_TYPE = { "content-type": "text/xml" };
const BEFORE_SESSION = "without a live session as the first parameter (login and system.* calls get no more)";
/** The pool's calls: a map a call may set (pool.set_other_config). */
/** The pool's calls, with the largest bodies a configuration may allow. */
const WITH_POOL: Partial<ServeOptions> = { features: [{ calls: poolCalls }], ...LARGE_BODIES };

/**
 * Sends a body while a probe call goes round and round: the answer to the body, the probe's slowest answer, and
 * the longest the event loop worked without a break meanwhile (the service runs in this process). The latter is
 * the one to hold to 50 ms: it is CPU time, where a probe's wall-clock time follows the machine's load.
 */
async function whileProbing(send: () => Promise<Reply>, probe: () => Promise<unknown>): Promise<{ reply: Reply; slowestProbeMs: number; longestMs: number }> {
  let slowestProbeMs = 0;
  collectGarbage();
  const { value: reply, longestMs } = await longestStep(async () => {
    let sending = true;
    const sent = send().finally(() => (sending = false));
    while (sending) {
      const start = performance.now();
      await probe();
      slowestProbeMs = Math.max(slowestProbeMs, performance.now() - start);
    }
    return sent;
  });
  return { reply, slowestProbeMs, longestMs };
}

/**
 * whileProbing up to three times, until the longest step is under 50 ms: a step of ours that is too long comes
 * back every time, a pause of a busy machine (a collection of this process's large bodies, another suite beside
 * it) does not. `longest`: each try's longest step.
 */
async function whileProbingSteadily(send: () => Promise<Reply>, probe: () => Promise<unknown>): Promise<{ reply: Reply; slowestProbeMs: number; longest: number[]; turned: boolean }> {
  const longest: number[] = [];
  for (;;) {
    const probed = await whileProbing(send, probe);
    longest.push(probed.longestMs);
    if (probed.longestMs < 50 || longest.length === 3) return { reply: probed.reply, slowestProbeMs: probed.slowestProbeMs, longest, turned: probed.longestMs < 50 };
  }
}

describe("toolstack HTTP: body limits", () => {
  test("16 MiB of small arrays over JSON-RPC, without a session: refused at 64 KiB in words, and the service serves meanwhile", async (t) => {
    const { url, login } = await serve(t, LARGE_BODIES);
    const session = await login();
    const body = Buffer.from(`{"jsonrpc":"2.0","method":"session.login_with_password","params":[${"[],".repeat((16 * MiB) / 3 - 100)}[]],"id":1}`);
    const probed = await whileProbingSteadily(
      () => post(`${url}jsonrpc`, body, JSON_TYPE),
      async () => assert.deepEqual((await jsonRpc(url, "task.get_all", [session])).result, []),
    );
    assert.equal(probed.reply.status, 413);
    assert.equal(probed.reply.text, `request body larger than 65536 bytes ${BEFORE_SESSION}\n`);
    assert.ok(probed.turned, `the event loop worked ${probed.longest.join(", ")} ms without a break`);
    assert.ok(probed.slowestProbeMs < 1000, `a probe took ${probed.slowestProbeMs} ms`);
    await login();
  });

  test("1 M values over XML-RPC, without a session: refused at 64 KiB in words, and the service serves meanwhile", async (t) => {
    const { url, login } = await serve(t, LARGE_BODIES);
    const session = await login();
    const values = `<param><value><array><data>${"<value/>".repeat(1_000_000)}</data></array></value></param>`;
    const body = Buffer.from(formatXmlRpcCall("session.login_with_password", ["root", ROOT_PASSWORD]).replace("</params>", `${values}</params>`));
    const probed = await whileProbingSteadily(
      () => post(url, body, XML_TYPE),
      async () => assert.deepEqual(await xmlRpc(url, "task.get_all", [session]), { Status: "Success", Value: [] }),
    );
    assert.equal(probed.reply.status, 413);
    assert.equal(probed.reply.text, `request body larger than 65536 bytes ${BEFORE_SESSION}\n`);
    assert.ok(probed.turned, `the event loop worked ${probed.longest.join(", ")} ms without a break`);
    assert.ok(probed.slowestProbeMs < 1000, `a probe took ${probed.slowestProbeMs} ms`);
    await login();
  });

  test("past 64 KiB only a call that takes a session and names a live one is read on: not a login, system.* or a dead session", async (t) => {
    const { url, login } = await serve(t);
    const session = await login();
    const padding = "p".repeat(70 * 1024);
    const refused = `request body larger than 65536 bytes ${BEFORE_SESSION}\n`;
    for (const [method, params] of [
      ["session.login_with_password", ["root", padding]],
      ["session.login_with_password", [session, padding]],
      ["system.listMethods", [session, padding]],
      ["task.create", ["OpaqueRef:wrong", padding, ""]],
      ["no.such_method", [session, padding]],
    ] as const) {
      assert.equal((await post(`${url}jsonrpc`, jsonBody(method, [...params]), JSON_TYPE)).text, refused, method);
      assert.equal((await post(url, formatXmlRpcCall(method, [...params]), XML_TYPE)).text, refused, method);
    }
    const task = (await jsonRpc(url, "task.create", [session, padding, ""])).result;
    assert.match(String(task), /^OpaqueRef:/);
    assert.equal((await jsonRpc(url, "task.get_name_label", [session, task])).result, padding);
    assert.equal((await xmlRpc(url, "task.create", [session, padding, ""])).Status, "Success");
  });

  test("values and depth before a session are refused in the protocol's words; the same with a live session are served", async (t) => {
    const { url, login } = await serve(t, WITH_POOL);
    const session = await login();
    const [pool] = (await jsonRpc(url, "pool.get_all", [session])).result as string[];
    // Over 1,000 values in under 64 KiB, over both wire forms.
    const map = bigMap(1100, 1100);
    assert.deepEqual((await jsonRpc(url, "pool.set_other_config", ["OpaqueRef:wrong", pool, map])).error, { code: -32600, message: `more than 1000 values ${BEFORE_SESSION}`, data: [] });
    assert.deepEqual(await xmlRpc(url, "pool.set_other_config", ["OpaqueRef:wrong", pool!, map]), { Status: "Failure", ErrorDescription: ["XMLRPC_UNMARSHAL_FAILURE", `more than 1000 values ${BEFORE_SESSION}`] });
    const deep = [[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]];
    assert.deepEqual((await jsonRpc(url, "session.login_with_password", ["root", deep])).error?.message, `nesting deeper than 16 arrays and objects ${BEFORE_SESSION}`);
    assert.deepEqual((await xmlRpc(url, "session.login_with_password", ["root", deep])).ErrorDescription, ["XMLRPC_UNMARSHAL_FAILURE", `nesting deeper than 16 elements ${BEFORE_SESSION}`]);
    assert.deepEqual((await jsonRpc(url, "pool.set_other_config", [session, pool, map])).result, "");
    assert.equal((await xmlRpc(url, "pool.set_other_config", [session, pool!, map])).Status, "Success");
    assert.deepEqual((await jsonRpc(url, "pool.get_other_config", [session, pool])).result, map);
    assert.deepEqual((await jsonRpc(url, "event.from", [session, deep, "", 0])).error?.message, "FIELD_TYPE_ERROR", "parsed, then checked by the call");
  });

  test("with a live session: over 25,000 values or 64 deep is refused in words; a large map is stored, over both wire forms", async (t) => {
    const { url, login } = await serve(t, WITH_POOL);
    const session = await login();
    const [pool] = (await jsonRpc(url, "pool.get_all", [session])).result as string[];
    const tooMany = bigMap(25_000, 1 * MiB);
    assert.deepEqual((await jsonRpc(url, "pool.set_other_config", [session, pool, tooMany])).error, { code: -32600, message: "more than 25000 values", data: [] });
    assert.deepEqual((await xmlRpc(url, "pool.set_other_config", [session, pool!, tooMany])).ErrorDescription, ["XMLRPC_UNMARSHAL_FAILURE", "more than 25000 values"]);
    let deep: XenValue = "x";
    for (let level = 0; level < 63; level++) deep = [deep];
    assert.deepEqual((await jsonRpc(url, "event.from", [session, deep, "", 0])).error, { code: -32600, message: "nesting deeper than 64 arrays and objects", data: [] });
    assert.deepEqual((await jsonRpc(url, "event.from", [session, (deep as XenValue[])[0], "", 0])).error?.message, "FIELD_TYPE_ERROR");
    for (const [send, map] of [
      [(m: XenValue) => jsonRpc(url, "pool.set_other_config", [session, pool, m]), bigMap(24_000, 4 * MiB)],
      [(m: XenValue) => xmlRpc(url, "pool.set_other_config", [session, pool!, m]), bigMap(20_000, 3 * MiB)],
    ] as const) {
      await send(map);
      assert.deepEqual((await jsonRpc(url, "pool.get_other_config", [session, pool])).result, map);
    }
  });

  test("the event loop keeps turning while the largest bodies allowed are parsed (15 MiB, 24,000 members)", async (t) => {
    const { url, login } = await serve(t, WITH_POOL);
    const session = await login();
    // A pool that is not there: the call parses and checks its parameters, then fails without storing them.
    const nowhere = "OpaqueRef:00000000-0000-0000-0000-000000000000";
    const json = Buffer.from(jsonBody("pool.set_other_config", [session, nowhere, bigMap(24_000, 15 * MiB)]));
    const xml = Buffer.from(formatXmlRpcCall("pool.set_other_config", [session, nowhere, bigMap(24_000, 12 * MiB)]));
    const probe = async () => assert.equal((await jsonRpc(url, "session.get_uuid", [session, session])).result?.constructor, String);
    for (const send of [() => post(`${url}jsonrpc`, json, JSON_TYPE), () => post(url, xml, XML_TYPE)]) {
      const probed = await whileProbingSteadily(send, probe);
      assert.match(probed.reply.text, /HANDLE_INVALID/);
      assert.ok(probed.turned, `the event loop worked ${probed.longest.join(", ")} ms without a break`);
    }
  });
});

test("every API answer says how long the service took over it (Server-Timing), over both wire forms", async (t) => {
  const { url } = await serve(t);
  const body = { jsonrpc: "2.0", method: "session.login_with_password", params: ["root", ROOT_PASSWORD], id: 1 };
  const answers = [
    await fetch(`${url}jsonrpc`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
    await fetch(url, { method: "POST", body: formatXmlRpcCall("session.login_with_password", ["root", ROOT_PASSWORD]), headers: { "content-type": "text/xml" } }),
    await fetch(`${url}jsonrpc`, { method: "POST", body: "{", headers: { "content-type": "application/json" } }),
  ];
  for (const answer of answers) {
    await answer.text();
    const timing = /^call;dur=(\d+(?:\.\d)?)$/.exec(answer.headers.get("server-timing") ?? "");
    assert.ok(timing, `Server-Timing: ${answer.headers.get("server-timing")}`);
    assert.ok(Number(timing[1]) < 10_000);
  }
});
