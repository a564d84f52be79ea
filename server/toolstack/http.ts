// The toolstack's HTTP(S) front: XenAPI over JSON-RPC (POST /jsonrpc) and XML-RPC (POST / and /xmlrpc),
// with limits on a call's body (body-limits.ts) that are small until the call names a live session; other
// paths (the /import and /export family) are added as routes.
import type { IncomingMessage, ServerResponse } from "node:http";
import { isIP } from "node:net";
import { trustedProxies } from "../config.ts";
import type { Toolstack } from "./toolstack.ts";
import { toXenApiError } from "./xenapi-errors.ts";
import { BEFORE_SESSION, type BodyLimits, type ShapeLimits, withSession } from "../xenapi/body-limits.ts";
import { parseJsonRpcBody, parseXmlRpcBody } from "../xenapi/call-parser.ts";
import { XenApiError } from "../xenapi/errors.ts";
import {
  formatJsonRpcError,
  formatJsonRpcRequestError,
  formatJsonRpcResult,
  jsonOverLimits,
  JsonRpcRequestError,
  peekJsonRpcCall,
} from "../xenapi/json-rpc.ts";
import { invokeSafely } from "./methods.ts";
import { formatXmlRpcFailure, formatXmlRpcSuccess, peekXmlRpcCall, XmlRpcParseError, xmlOverLimits } from "../xenapi/xml-rpc.ts";

/**
 * Largest API request body accepted from a call naming a live session (HANGAR_API_MAX_BODY bytes); uploads go
 * to /import, not here. xapi takes 300 KiB (http_limit_max_rpc_size); a call that stores a record of many MiB
 * holds the event loop while it is written (~20 ms a MiB), so the default stays near xapi's.
 */
export const DEFAULT_MAX_API_BODY = 2 * 1024 * 1024;

export type Route = (ts: Toolstack, request: IncomingMessage, response: ServerResponse, url: URL) => Promise<void>;

export interface HttpOptions {
  maxApiBody?: number;
  /** Further routes by path, without a trailing slash (e.g. "/import"). */
  routes?: Record<string, Route>;
}

class BodyTooLarge extends Error {}

/** How a body may outgrow its first limit: up to `limit` bytes when `allows` (asked once, with the bytes so far) says so. */
interface Extension {
  limit: number;
  allows(prefix: Buffer): Promise<boolean>;
  /** The 413's words when it does not. */
  refusal: string;
}

/** A request's body as it arrived, chunk by chunk (each with a memory of its own: the HTTP parser copies them). */
async function readBody(request: IncomingMessage, limit: number, extension?: Extension): Promise<Buffer[]> {
  const declared = Number(request.headers["content-length"] ?? 0);
  const most = extension?.limit ?? limit;
  if (declared > most) throw new BodyTooLarge(`request body larger than ${most} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    chunks.push(chunk as Buffer);
    if (size > limit && extension !== undefined) {
      if (!(await extension.allows(Buffer.concat(chunks)))) throw new BodyTooLarge(extension.refusal);
      limit = extension.limit;
      extension = undefined;
    }
    if (size > limit) throw new BodyTooLarge(`request body larger than ${limit} bytes`);
  }
  return chunks;
}

/** What `read` answers, or undefined once a 413 has answered a body over its limit. */
async function or413<T>(response: ServerResponse, read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (error) {
    if (!(error instanceof BodyTooLarge)) throw error;
    send(response, 413, "text/plain", `${error.message}\n`);
    return undefined;
  }
}

/** The body, or undefined once a 413 has answered a body over the limit. */
export async function readBodyOr413(request: IncomingMessage, response: ServerResponse, limit: number): Promise<string | undefined> {
  const chunks = await or413(response, readBody(request, limit));
  return chunks === undefined ? undefined : Buffer.concat(chunks).toString("utf8");
}

/** What the call limits need of a wire form: its structure check, and its method and first parameter from the first bytes. */
interface WireForm {
  overLimits(text: string, limits: ShapeLimits): string | undefined;
  peek(prefix: string): { method: string; first: string } | undefined;
}

const JSON_RPC: WireForm = { overLimits: jsonOverLimits, peek: peekJsonRpcCall };
const XML_RPC: WireForm = { overLimits: xmlOverLimits, peek: peekXmlRpcCall };

/** Whether a call takes a session and names a live one first: only such a call may send a large body. */
async function namesLiveSession(ts: Toolstack, call: { method: string; first: string } | undefined): Promise<boolean> {
  if (call === undefined) return false;
  const name = call.method.startsWith("Async.") ? call.method.slice("Async.".length) : call.method;
  if (ts.methods.get(name)?.session !== true) return false;
  try {
    await ts.sessions.check(call.first);
    return true;
  } catch (error) {
    if (error instanceof XenApiError && error.code === "SESSION_INVALID") return false;
    throw error;
  }
}

/**
 * A call's body and the limits it is parsed with: those before a session, unless it outgrows them and names a
 * live session (peeked from its first bytes; the call's own session check still comes after parsing). A body
 * too large is answered 413 and undefined.
 */
async function readCallBody(ts: Toolstack, request: IncomingMessage, response: ServerResponse, wire: WireForm, maxBody: number): Promise<{ chunks: Buffer[]; limits: BodyLimits } | undefined> {
  const small = { ...BEFORE_SESSION, maxBytes: Math.min(BEFORE_SESSION.maxBytes, maxBody) };
  let live: Promise<boolean> | undefined;
  const allows = (bytes: Buffer) => (live ??= namesLiveSession(ts, wire.peek(bytes.toString("utf8"))));
  const extension = maxBody > small.maxBytes ? { limit: maxBody, allows, refusal: `request body larger than ${small.maxBytes} bytes ${small.scope}` } : undefined;
  const chunks = await or413(response, readBody(request, small.maxBytes, extension));
  if (chunks === undefined) return undefined;
  // Past the small size the session was checked already (and found live).
  if (live !== undefined) return { chunks, limits: withSession(maxBody) };
  const body = Buffer.concat(chunks);
  const fitsSmall = wire.overLimits(body.toString("utf8"), small) === undefined;
  return { chunks, limits: fitsSmall || !(await allows(body)) ? small : withSession(maxBody) };
}

/** `started`: when the call's handling began; the time taken is answered in `Server-Timing` (`call;dur=<ms>`). */
/**
 * The caller's address as the connection shows it (an IPv4 address without its IPv6 mapping prefix); for a
 * trusted proxy (HANGAR_TRUSTED_PROXIES: the console on this host by default) that names the address it calls
 * for in X-Forwarded-For, both: `203.0.113.5 via 127.0.0.1`.
 */
export function clientAddress(request: IncomingMessage): string {
  const peer = (request.socket.remoteAddress ?? "").replace(/^::ffff:/, "");
  const claimed = String(request.headers["x-forwarded-for"] ?? "").split(",").at(-1)!.trim().replace(/^::ffff:/, "");
  return isIP(claimed) !== 0 && trustedProxies().includes(peer) ? `${claimed} via ${peer}` : peer;
}

export function send(response: ServerResponse, status: number, contentType: string, body: string, started?: number): void {
  const headers: Record<string, string | number> = { "content-type": contentType, "content-length": Buffer.byteLength(body) };
  if (started !== undefined) headers["server-timing"] = `call;dur=${(performance.now() - started).toFixed(1)}`;
  response.writeHead(status, headers);
  endAnswer(response, body);
}

/** How long the rest of a body is read away after an early answer, in all and without a byte (nginx's lingering close). */
const LINGER_MS = 30_000;
const LINGER_IDLE_MS = 5_000;

/**
 * Ends an answer. One given before the request's body was read (a refusal, a 404, a 413) first reads the rest
 * of the body away, as nginx's lingering close does: Node would close the socket under a client still sending,
 * and that client (Python's urllib, Node's fetch) would get a broken pipe or a reset instead of the answer.
 */
export function endAnswer(response: ServerResponse, body?: string): void {
  const request = response.req;
  if (request.complete || request.destroyed) {
    response.end(body);
    return;
  }
  if (body !== undefined) response.write(body);
  void readAway(request).then(() => response.end());
}

/** Reads the rest of a request's body and drops it: at most LINGER_MS, and LINGER_IDLE_MS without a byte; then it is cut. */
export async function readAway(request: IncomingMessage): Promise<void> {
  // A body stream that read it is gone; its pipe would pause the request again.
  request.unpipe();
  request.resume();
  await new Promise<void>((resolve) => {
    if (request.complete || request.destroyed) return resolve();
    const cut = () => request.destroy();
    const total = setTimeout(cut, LINGER_MS);
    let idle = setTimeout(cut, LINGER_IDLE_MS);
    const arrived = () => {
      clearTimeout(idle);
      idle = setTimeout(cut, LINGER_IDLE_MS);
    };
    const done = () => {
      clearTimeout(total);
      clearTimeout(idle);
      request.off("data", arrived);
      resolve();
    };
    request.on("data", arrived);
    request.once("end", done).once("close", done);
  });
}

async function serveJsonRpc(ts: Toolstack, request: IncomingMessage, response: ServerResponse, limit: number): Promise<void> {
  const type = String(request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/json") {
    send(response, 415, "text/plain", "JSON-RPC needs content-type application/json\n");
    return;
  }
  const started = performance.now();
  const read = await readCallBody(ts, request, response, JSON_RPC, limit);
  if (read === undefined) return;
  let call;
  try {
    call = await parseJsonRpcBody(read.chunks, read.limits);
  } catch (error) {
    if (error instanceof JsonRpcRequestError) return send(response, 200, "application/json", formatJsonRpcRequestError(error), started);
    throw error;
  }
  const outcome = await invokeSafely(ts, call.method, call.params, clientAddress(request));
  send(response, 200, "application/json", outcome.ok ? formatJsonRpcResult(call, outcome.value) : formatJsonRpcError(call, outcome.error), started);
}

async function serveXmlRpc(ts: Toolstack, request: IncomingMessage, response: ServerResponse, limit: number): Promise<void> {
  const started = performance.now();
  const read = await readCallBody(ts, request, response, XML_RPC, limit);
  if (read === undefined) return;
  let call;
  try {
    call = await parseXmlRpcBody(read.chunks, read.limits);
  } catch (error) {
    if (error instanceof XmlRpcParseError) return send(response, 200, "text/xml", formatXmlRpcFailure(["XMLRPC_UNMARSHAL_FAILURE", error.message]), started);
    throw error;
  }
  const outcome = await invokeSafely(ts, call.method, call.params, clientAddress(request));
  send(response, 200, "text/xml", outcome.ok ? formatXmlRpcSuccess(outcome.value) : formatXmlRpcFailure(outcome.error.description), started);
}

/** Whether the client waits for `100 Continue` before sending its body. */
export function expectsContinue(request: IncomingMessage): boolean {
  return String(request.headers.expect ?? "").toLowerCase() === "100-continue";
}

/** The request handler shared by the HTTP and HTTPS servers (for requests and for `Expect: 100-continue`). */
/**
 * A request's target as a URL: origin-form ("/path?query") taken as sent, so "//x" is a path and not a host;
 * absolute-form as HTTP/1.1 allows it. Undefined when it does not parse ("http://[::1"): `new URL` would throw
 * outside any request's handling and stop the service.
 */
function requestTarget(target: string): URL | undefined {
  return URL.parse(target.startsWith("/") ? `http://toolstack${target}` : target) ?? undefined;
}

export function createHandler(ts: Toolstack, options: HttpOptions = {}) {
  const limit = options.maxApiBody ?? DEFAULT_MAX_API_BODY;
  return (request: IncomingMessage, response: ServerResponse): void => {
    const url = requestTarget(request.url ?? "/");
    if (url === undefined) return send(response, 400, "text/plain", "malformed request target\n");
    const path = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, "") : url.pathname;
    // A route named `/prefix/*` takes every path under /prefix (e.g. /plugins/volume/file).
    const route = options.routes?.[path] ?? options.routes?.[`/${path.split("/")[1] ?? ""}/*`];
    // Routes decide for themselves whether a body is welcome (they refuse before it is sent); API calls always are.
    if (route === undefined && expectsContinue(request)) response.writeContinue();
    const work =
      route !== undefined
        ? route(ts, request, response, url)
        : request.method === "POST" && path === "/jsonrpc"
          ? serveJsonRpc(ts, request, response, limit)
          : request.method === "POST" && (path === "/" || path === "/xmlrpc" || path === "/RPC2")
            ? serveXmlRpc(ts, request, response, limit)
            : Promise.resolve(send(response, 404, "text/plain", `no such resource: ${request.method} ${url.pathname}\n`));
    work.catch((error: unknown) => {
      // Bytes of the request that do not decode (bad percent-encoding in a path segment, the query or a cookie)
      // are the caller's fault, wherever a route decodes them.
      if (error instanceof URIError) {
        if (!response.headersSent) send(response, 400, "text/plain", "malformed percent-encoding in the request\n");
        else response.destroy();
        return;
      }
      // A client that went away before its request was read (a body shorter than its length, a reset) is not a
      // bug of the service: there is no one to answer.
      if (!request.complete && request.destroyed) {
        response.destroy();
        return;
      }
      // Anything else is a bug, never the caller's fault: answer 500 if we still can; the service keeps serving.
      console.error(`${request.method} ${url.pathname}:`, error);
      if (!response.headersSent) send(response, 500, "text/plain", `${toXenApiError(error).message}\n`);
      else response.destroy();
    });
  };
}
