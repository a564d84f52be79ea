// Fuzz target (issue 22): the served toolstack's HTTP front, over raw sockets. Request lines (methods, paths with
// bad percent-encoding, absolute forms, versions), headers (huge, many, duplicated, folded; Content-Length and
// Transfer-Encoding wrong or at odds; cookies, Expect, Authorization, Upgrade), framings (whole, chunked, cut
// short, left open) and bodies (JSON-RPC and XML-RPC calls that change nothing, archives' first bytes, noise)
// to /, /jsonrpc, the /import and /export family, /plugins and /metrics. Each case: no 500 and no
// INTERNAL_ERROR (both are this service's bugs), nothing reported to the console as one, a complete request
// answered (or its connection closed) within the bound, the service answering a probe call while the case's
// connection is open, and no task left pending once that connection is gone.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget, within, xenString, xenValue } from "../fuzz-testing.ts";
import { jsonRpcBody, xmlRpcBody } from "../xenapi/rpc-fuzz-testing.ts";
import type { XenValue } from "../xenapi/values.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";
import { startTestToolstack, type TestToolstack } from "./storage-testing.ts";
import { ROOT_PASSWORD } from "./testing.ts";
import { collect, http, MiB, patternBlock, testXva } from "./transfer/testing.ts";

const BUDGET: FuzzBudget = { slice: 40, full: 3000, fullSeconds: 60, caseMs: 15_000 };
/** A complete request is answered (or its connection closed) within this. */
const ANSWER_MS = 5000;
/** What an incomplete request may get meanwhile (an early refusal) is waited for this long. */
const EARLY_MS = 250;
/** The probe call, made while the case's connection is open. */
const PROBE_MS = 2000;
/** How long the handler may go on with a request after its connection is gone, before what it made is looked at. */
const HANDLER_MS = 300;
/** No task stays pending longer than this once the connection is gone. */
const SETTLE_MS = 5000;

/** Targets that are no URL, or whose "//" would read as a host: once an uncaught exception that ended the service. */
const TARGETS_NOT_URLS = ["http://[::1", "http://%zz/", "http://x:99999/"];

/** XenAPI calls that change nothing: the served cases may send them with a live session. */
const QUIET_CALLS = ["session.get_this_host", "session.get_record", "session.get_uuid", "VM.get_all", "VM.get_all_records", "VM.get_record", "VM.get_by_uuid", "VM.get_name_label", "VDI.get_all", "VDI.get_record", "SR.get_all_records", "SR.get_record", "task.get_all", "task.get_record", "host.get_all", "pool.get_all", "network.get_all_records", "system.listMethods", "event.get_current_id", "session.login_with_password", "Plugin.query", "Plugin.diagnostics"];

let host: TestToolstack;
/** A VM for /export to stream: a small disk, a CD and a VIF. */
let vm: string;
before(async () => {
  host = await startTestToolstack();
  const archive = await collect(testXva({ name: "exported by the fuzz", disks: [{ size: 2 * MiB, blocks: new Map([[1, patternBlock(1)]]) }] }));
  const answer = await http(`${host.client.url}/import?session_id=${host.client.session}`, { method: "PUT", body: archive });
  const task = await host.client.waitTask(String(answer.headers["task-id"]));
  vm = (parseXmlRpcValue(String(task.result)) as string[])[0]!;
});
after(async () => host.stop());

/** The first final answer on a connection (1xx answers skipped): its status, and whether it is all there (by its length or its chunked end; a HEAD's has no body). */
function firstAnswer(data: Buffer, head: boolean): { status: number; whole: boolean } | undefined {
  for (let at = 0; ; ) {
    const end = data.indexOf("\r\n\r\n", at);
    if (end < 0) return undefined;
    const lines = data.toString("latin1", at, end);
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines)?.[1]);
    if (status >= 100 && status < 200) {
      at = end + 4;
      continue;
    }
    if (head || status === 204 || status === 304) return { status, whole: true };
    const length = /\r\ncontent-length: *(\d+)/i.exec(lines);
    if (length !== null) return { status, whole: data.length - (end + 4) >= Number(length[1]) };
    return { status, whole: /\r\ntransfer-encoding: *chunked/i.test(lines) && data.subarray(end + 2).includes("\r\n0\r\n\r\n") };
  }
}

type Answer = ReturnType<typeof firstAnswer>;

/**
 * Sends `request` on a connection of its own and reads until `enough` says so, the connection closes or `waitMs`
 * have passed; `meanwhile` runs with the connection open. Answers what came back.
 */
async function exchange(port: number, request: Buffer, head: boolean, enough: (answer: Answer) => boolean, waitMs: number, meanwhile: () => Promise<void>): Promise<{ bytes: Buffer; answer: Answer; closed: boolean }> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  const chunks: Buffer[] = [];
  let closed = false;
  const done = new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, waitMs);
    const finish = () => {
      clearTimeout(timer);
      resolve();
    };
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      if (enough(firstAnswer(Buffer.concat(chunks), head))) finish();
    });
    socket.on("close", () => {
      closed = true;
      finish();
    });
  });
  socket.write(request);
  try {
    await Promise.all([done, meanwhile()]);
  } finally {
    socket.destroy();
  }
  const bytes = Buffer.concat(chunks);
  return { bytes, answer: firstAnswer(bytes, head), closed };
}

// ---- requests ----

type Framing = "length" | "chunked" | "none" | "short" | "chunked-open" | "chunked-bad" | "declared-huge";
/** Framings after which the server has the whole request (unless a fuzzed header says otherwise). */
const COMPLETE: ReadonlySet<Framing> = new Set(["length", "chunked", "none", "chunked-bad"]);

/**
 * Requests as a client of each endpoint sends them (method, path, query, content type, body), then perturbed:
 * another method, path suffix or argument, credentials in the query, a cookie or Basic (good or not), a few
 * headers of the fuzzed kinds, another version, framing or line end. Most perturbations are rare, so that most
 * requests get past Node's parser to the handlers.
 */
function requests(session: string, vm: string) {
  const quietCall = { method: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...QUIET_CALLS) }, xenString), params: fc.tuple(fc.oneof({ weight: 3, arbitrary: fc.constant<XenValue>(session) }, xenValue), fc.array(xenValue, { maxLength: 3 })).map(([first, rest]) => [first, ...rest]) };
  // Bodies are bytes held as latin1 strings: a counterexample then reads as text.
  const bytes = (text: string) => Buffer.from(text).toString("latin1");
  const json = jsonRpcBody(quietCall).map(bytes);
  const xml = xmlRpcBody(quietCall).map(bytes);
  const noise = fc.oneof(fc.uint8Array({ maxLength: 4096 }).map((data) => Buffer.from(data).toString("latin1")), fc.constantFrom("\x1f\x8b\x08\x00", "\x28\xb5\x2f\xfd", "ova.xml\0", "\0".repeat(1024)));
  const none = fc.constant("");
  const exportArgs = fc.constantFrom(`ref=${vm}`, `ref=${vm}&use_compression=zstd`, `ref=${vm}&checksum=sha1`, `ref=${vm}&offset=5&etag=x`, "uuid=x", "ref=OpaqueRef:NULL", "");
  const endpoint = fc.oneof(
    fc.record({ method: fc.constant("POST"), route: fc.constant("/jsonrpc"), query: fc.constant(""), type: fc.constant("application/json"), body: json }),
    fc.record({ method: fc.constant("POST"), route: fc.constantFrom("/", "/xmlrpc", "/RPC2"), query: fc.constant(""), type: fc.constant("text/xml"), body: xml }),
    fc.record({ method: fc.constant("PUT"), route: fc.constantFrom("/import", "/import_metadata"), query: fc.constantFrom("", "force=true", "dry_run=true", "sr_id=OpaqueRef:NULL", "restore=maybe"), type: fc.constant(""), body: noise }),
    fc.record({ method: fc.constantFrom("GET", "HEAD"), route: fc.constantFrom("/export", "/export_metadata"), query: exportArgs, type: fc.constant(""), body: none }),
    fc.record({ method: fc.constant("POST"), route: fc.constantFrom("/plugins/volume/org.xen.xapi.storage.file", "/plugins/datapath/nbd", "/plugins/volume/nope"), query: fc.constant(""), type: fc.constant("application/json"), body: json }),
    fc.record({ method: fc.constant("GET"), route: fc.constantFrom("/plugins", "/metrics/x", "/metrics/..", "/nope"), query: fc.constant(""), type: fc.constant(""), body: none }),
  );
  const rarely = <T,>(usual: T, other: fc.Arbitrary<T>) => fc.oneof({ weight: 8, arbitrary: fc.constant(usual) }, other);
  const segment = fc.constantFrom("/", "//", "/%zz", "/%E0%A4%A", "/%00", "/%2F", "/..", "/%2e%2e/export", "/a/b/c", ";x", "%", "?", "#x");
  const arg: fc.Arbitrary<[string, string]> = fc.tuple(
    fc.constantFrom("session_id", "ref", "uuid", "use_compression", "checksum", "offset", "etag", "task_id", "sr_id", "force", "restore", "dry_run", "vdi:x", "x", "", "session_id%zz"),
    fc.oneof(fc.constant(session), fc.constantFrom("OpaqueRef:NULL", "OpaqueRef:00000000-0000-4000-8000-000000000000", "%zz", "%E0%A4%A", "", "true", "zstd", "-1", "1e999", "99999999999999999999", "&", "="), fc.webSegment()),
  );
  const target = fc.oneof(
    { weight: 20, arbitrary: fc.constant(null) },
    fc.constantFrom("*", "http://127.0.0.1/jsonrpc", "jsonrpc", "/ jsonrpc", "/\u00e9", "/\t", ...TARGETS_NOT_URLS),
    fc.nat({ max: 40_000 }).map((n) => `/${"a".repeat(n)}`),
  );
  const basic = (credentials: string) => `Basic ${Buffer.from(credentials).toString("base64")}`;
  const credentials = fc.oneof(
    { weight: 4, arbitrary: fc.constant<[string, string] | null>(["query", `session_id=${session}`]) },
    fc.constant<[string, string] | null>(["Cookie", `session_id=${session}`]),
    fc.constant<[string, string] | null>(["Authorization", basic(`root:${ROOT_PASSWORD}`)]),
    fc.constantFrom<[string, string] | null>(null, ["query", "session_id=OpaqueRef:x"], ["Cookie", "session_id=%zz"], ["Cookie", "session_id=%E0%A4%A"], ["Cookie", "=x; ;;"], ["Authorization", basic("root:wrong")], ["Authorization", basic("root")], ["Authorization", "Basic !!!"], ["Authorization", "Bearer x"], ["Authorization", `Basic ${"A".repeat(5000)}`]),
  );
  const header = fc.oneof(
    { weight: 3, arbitrary: fc.tuple(fc.constant("Content-Type"), fc.constantFrom("application/json", "text/xml", "application/json; charset=utf-8", "APPLICATION/JSON", "", "x/y")) },
    { weight: 3, arbitrary: fc.tuple(fc.constant("Cookie"), fc.constantFrom(`session_id=${session}`, "a=b; ".repeat(200), `session_id=${session}; session_id=OpaqueRef:x`, "session_id")) },
    { weight: 3, arbitrary: fc.tuple(fc.constant("Expect"), fc.constantFrom("100-continue", "100-Continue", "200-ok", "")) },
    { weight: 2, arbitrary: fc.tuple(fc.constantFrom("Connection", "Upgrade"), fc.constantFrom("close", "keep-alive", "upgrade", "websocket", "h2c", "Upgrade, HTTP2-Settings")) },
    { weight: 2, arbitrary: fc.tuple(fc.constant("Transfer-Encoding"), fc.constantFrom("chunked", "gzip, chunked", "identity", "chunked, chunked", "chunk", "gzip")) },
    { weight: 2, arbitrary: fc.tuple(fc.constant("Content-Length"), fc.constantFrom("-1", "abc", "1e3", "99999999999999999999", " 5", "5, 5", "0x10", "0")) },
    { weight: 3, arbitrary: fc.tuple(fc.constantFrom("X-Hangar-Pool-Secret", "Host", "Range", "Accept-Encoding", "Authorization"), fc.oneof(fc.constantFrom("", "x", "bytes=0-1", "gzip, zstd"), fc.string({ unit: "binary-ascii", maxLength: 40 }))) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom("X-Big", "Cookie"), fc.nat({ max: 40_000 }).map((n) => "v".repeat(n))) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom("Bad Name", "X-Nul", " X-Folded", "X-\u00e9", ""), fc.constantFrom("v", "a\u0000b", "\u00ff", " folded")) },
  );
  return fc.record({
    endpoint,
    method: rarely<string | null>(null, fc.constantFrom("GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "get", "PRI", "", "GÉT", "X".repeat(80))),
    target,
    suffix: rarely("", segment),
    args: fc.oneof({ weight: 3, arbitrary: fc.constant<[string, string][]>([]) }, fc.array(arg, { minLength: 1, maxLength: 4 })),
    credentials,
    version: rarely("HTTP/1.1", fc.constantFrom("HTTP/1.0", "HTTP/2.0", "HTTP/0.9", "HTTP/1.2", "http/1.1", "HTTP/1.1 x", "")),
    host: rarely(true, fc.constant(false)),
    headers: fc.oneof({ weight: 2, arbitrary: fc.constant<[string, string][]>([]) }, fc.array(header, { minLength: 1, maxLength: 3 })),
    many: rarely(0, fc.nat({ max: 3000 })),
    framing: fc.oneof({ weight: 8, arbitrary: fc.constantFrom<Framing>("length", "chunked") }, fc.constantFrom<Framing>("none", "short", "chunked-open", "chunked-bad", "declared-huge")),
    lineEnd: rarely("\r\n", fc.constant("\n")),
  });
}

type Request = ReturnType<typeof requests> extends fc.Arbitrary<infer T> ? T : never;

/**
 * The request's bytes; whether the server has all of it (its answer must then come), and whether an import route
 * takes it (which answers, or makes its task, before it reads the body).
 */
function requestBytes(r: Request, port: number): { bytes: Buffer; complete: boolean; head: boolean } {
  const { endpoint, credentials } = r;
  const method = r.method ?? endpoint.method;
  const framing = r.framing;
  const query = [endpoint.query, credentials?.[0] === "query" ? credentials[1] : "", ...r.args.map(([key, value]) => `${key}=${value}`)].filter((part) => part !== "").join("&");
  const target = r.target ?? `${endpoint.route + r.suffix}${query === "" ? "" : `?${query}`}`;
  const lines = [`${method} ${target}${r.version === "" ? "" : ` ${r.version}`}`];
  if (r.host) lines.push(`Host: 127.0.0.1:${port}`);
  if (endpoint.type !== "") lines.push(`Content-Type: ${endpoint.type}`);
  if (credentials !== null && credentials[0] !== "query") lines.push(`${credentials[0]}: ${credentials[1]}`);
  for (const [name, value] of r.headers) lines.push(`${name}: ${value}`);
  for (let n = 0; n < r.many; n++) lines.push(`X-Many-${n}: ${n}`);
  const body = Buffer.from(endpoint.body, "latin1");
  let payload = body;
  if (framing === "length") lines.push(`Content-Length: ${body.length}`);
  if (framing === "short") lines.push(`Content-Length: ${body.length + 1 + (body.length % 100)}`);
  if (framing === "declared-huge") lines.push("Content-Length: 17000000");
  if (framing.startsWith("chunked")) {
    lines.push("Transfer-Encoding: chunked");
    const half = Math.floor(body.length / 2);
    const chunk = (data: Buffer) => (data.length === 0 ? [] : [Buffer.from(`${data.length.toString(16)}\r\n`), data, Buffer.from("\r\n")]);
    const end = framing === "chunked" ? "0\r\n\r\n" : framing === "chunked-bad" ? "zz\r\nx\r\n0\r\n\r\n" : "";
    payload = Buffer.concat([...chunk(body.subarray(0, half)), ...chunk(body.subarray(half)), Buffer.from(end)]);
  }
  const bytes = Buffer.concat([Buffer.from(lines.join(r.lineEnd) + r.lineEnd + r.lineEnd, "latin1"), payload]);
  const framingHeader = r.headers.some(([name]) => /^(content-length|transfer-encoding)$/i.test(name));
  return { bytes, complete: COMPLETE.has(framing) && !framingHeader, head: method === "HEAD" };
}

/** The status codes of the answers on a connection. */
const statuses = (bytes: Buffer) => [...bytes.toString("latin1").matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

async function pendingTasks(): Promise<string[]> {
  const records = await host.client.call<Record<string, { status: string; name_label: string }>>("task.get_all_records");
  return Object.values(records)
    .filter((task) => task.status === "pending" || task.status === "cancelling")
    .map((task) => task.name_label);
}

test("HTTP front: fuzzed requests are answered without a 500, the service probing fine meanwhile", async (t) => {
  // The handler reports to the console what it takes for a bug of its own (and answers 500 if it still can).
  const reported = t.mock.method(console, "error", () => undefined);
  const port = host.service.httpPort;
  // Requests that reached the handler (Node answers those it cannot parse itself): counted, not changed.
  let handled = 0;
  for (const event of ["request", "checkContinue"]) host.service.http.prependListener(event, () => handled++);
  await fuzz(t, "http front", BUDGET, requests(host.client.session, vm), async (r) => {
    const { bytes, complete, head: isHead } = requestBytes(r, port);
    const reportedBefore = reported.mock.callCount();
    const handledBefore = handled;
    const probe = async () => {
      await within(PROBE_MS, host.client.call("session.get_this_host", host.client.session), "the probe call while the case's connection is open");
    };
    const enough = (answer: Answer) => answer?.whole === true;
    const { bytes: got, answer, closed } = await exchange(port, bytes, isHead, enough, complete ? ANSWER_MS : EARLY_MS, probe);
    const head = got.toString("latin1", 0, 300);
    assert.ok(!statuses(got).includes(500), `a 500: ${head}`);
    assert.ok(!got.includes("INTERNAL_ERROR"), `INTERNAL_ERROR: ${got.toString("latin1", 0, 600)}`);
    if (complete) assert.ok(answer?.whole === true || closed, `a complete request had no whole answer within ${ANSWER_MS} ms (got ${JSON.stringify(head)})`);
    // The handler may still be at work on a request it took without answering it whole (checking a session, making a task).
    if (handled > handledBefore && answer?.whole !== true) await sleep(HANDLER_MS);
    for (const deadline = Date.now() + SETTLE_MS; ; await sleep(50)) {
      const pending = await pendingTasks();
      if (pending.length === 0) break;
      assert.ok(Date.now() < deadline, `tasks still pending ${SETTLE_MS} ms after the connection was closed: ${pending.join(", ")}`);
    }
    const reports = reported.mock.calls
      .slice(reportedBefore)
      .map((call) => call.arguments.map(String).join(" "));
    assert.deepEqual(reports, [], "the handler reported a bug");
  });
});
