// The toolstack's HTTP(S) front: XenAPI over JSON-RPC (POST /jsonrpc) and XML-RPC (POST / and /xmlrpc),
// with a cap on body size; other paths (the /import and /export family) are added as routes.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Toolstack } from "./toolstack.ts";
import { toXenApiError } from "./xenapi-errors.ts";
import {
  formatJsonRpcError,
  formatJsonRpcRequestError,
  formatJsonRpcResult,
  JsonRpcRequestError,
  parseJsonRpcCall,
} from "../xenapi/json-rpc.ts";
import { invokeSafely } from "./methods.ts";
import { formatXmlRpcFailure, formatXmlRpcSuccess, parseXmlRpcCall, XmlRpcParseError } from "../xenapi/xml-rpc.ts";

/** Largest API request body accepted (HANGAR_API_MAX_BODY bytes); uploads go to /import, not here. */
export const DEFAULT_MAX_API_BODY = 16 * 1024 * 1024;

export type Route = (ts: Toolstack, request: IncomingMessage, response: ServerResponse, url: URL) => Promise<void>;

export interface HttpOptions {
  maxApiBody?: number;
  /** Further routes by path, without a trailing slash (e.g. "/import"). */
  routes?: Record<string, Route>;
}

class BodyTooLarge extends Error {}

async function readBody(request: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(request.headers["content-length"] ?? 0);
  if (declared > limit) throw new BodyTooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The body, or undefined once a 413 has answered a body over the limit. */
export async function readBodyOr413(request: IncomingMessage, response: ServerResponse, limit: number): Promise<string | undefined> {
  try {
    return await readBody(request, limit);
  } catch (error) {
    if (!(error instanceof BodyTooLarge)) throw error;
    send(response, 413, "text/plain", `request body larger than ${limit} bytes\n`);
    return undefined;
  }
}

export function send(response: ServerResponse, status: number, contentType: string, body: string): void {
  response.writeHead(status, { "content-type": contentType, "content-length": Buffer.byteLength(body) });
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
  const text = await readBodyOr413(request, response, limit);
  if (text === undefined) return;
  let call;
  try {
    call = parseJsonRpcCall(text);
  } catch (error) {
    if (error instanceof JsonRpcRequestError) return send(response, 200, "application/json", formatJsonRpcRequestError(error));
    throw error;
  }
  const outcome = await invokeSafely(ts, call.method, call.params);
  send(response, 200, "application/json", outcome.ok ? formatJsonRpcResult(call, outcome.value) : formatJsonRpcError(call, outcome.error));
}

async function serveXmlRpc(ts: Toolstack, request: IncomingMessage, response: ServerResponse, limit: number): Promise<void> {
  const text = await readBodyOr413(request, response, limit);
  if (text === undefined) return;
  let call;
  try {
    call = parseXmlRpcCall(text);
  } catch (error) {
    if (error instanceof XmlRpcParseError) return send(response, 200, "text/xml", formatXmlRpcFailure(["XMLRPC_UNMARSHAL_FAILURE", error.message]));
    throw error;
  }
  const outcome = await invokeSafely(ts, call.method, call.params);
  send(response, 200, "text/xml", outcome.ok ? formatXmlRpcSuccess(outcome.value) : formatXmlRpcFailure(outcome.error.description));
}

/** Whether the client waits for `100 Continue` before sending its body. */
export function expectsContinue(request: IncomingMessage): boolean {
  return String(request.headers.expect ?? "").toLowerCase() === "100-continue";
}

/** The request handler shared by the HTTP and HTTPS servers (for requests and for `Expect: 100-continue`). */
export function createHandler(ts: Toolstack, options: HttpOptions = {}) {
  const limit = options.maxApiBody ?? DEFAULT_MAX_API_BODY;
  return (request: IncomingMessage, response: ServerResponse): void => {
    const url = new URL(request.url ?? "/", "http://toolstack");
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
      // Anything else is a bug, never the caller's fault: answer 500 if we still can; the service keeps serving.
      console.error(`${request.method} ${url.pathname}:`, error);
      if (!response.headersSent) send(response, 500, "text/plain", `${toXenApiError(error).message}\n`);
      else response.destroy();
    });
  };
}
