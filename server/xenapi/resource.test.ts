// The HTTP resources' client against a plain Node server playing the toolstack's part: redirects followed
// with the method kept (and no further than 5), the probe's refusals in words, a body streamed whole.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { test } from "node:test";
import { get, MAX_REDIRECTS, probePut, putResource, ResourceRefused, resourceUrl } from "./resource.ts";

interface Seen {
  method: string;
  path: string;
  bytes: number;
}

async function serve(t: { after(fn: () => unknown): void }, handle: (request: IncomingMessage, response: ServerResponse, seen: Seen[]) => void): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server: Server = createServer((request, response) => {
    const entry = { method: request.method ?? "", path: request.url ?? "", bytes: 0 };
    seen.push(entry);
    request.on("data", (chunk: Buffer) => (entry.bytes += chunk.length));
    handle(request, response, seen);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** `/hop/N` redirects to `/hop/N-1` (keeping the query) until `/hop/0`, which answers 200. */
function hops(request: IncomingMessage, response: ServerResponse): void {
  const url = new URL(request.url ?? "/", "http://x");
  const left = Number(/^\/hop\/(\d+)$/.exec(url.pathname)?.[1] ?? 0);
  if (left > 0) {
    response.writeHead(302, { location: `/hop/${left - 1}${url.search}` }).end("moved");
    return;
  }
  request.resume();
  request.on("end", () => response.writeHead(200, { "task-id": "OpaqueRef:t" }).end("done"));
}

test("resourceUrl: the session and the query, values left out when undefined", () => {
  const url = resourceUrl("http://h:8080", "OpaqueRef:s", "/import", { sr_id: "OpaqueRef:sr", force: undefined });
  assert.equal(url.toString(), "http://h:8080/import?session_id=OpaqueRef%3As&sr_id=OpaqueRef%3Asr");
});

test("probePut: follows the pool's redirects as PUTs with no body, up to 5", async (t) => {
  const { url, seen } = await serve(t, hops);
  const target = await probePut(new URL(`${url}/hop/${MAX_REDIRECTS}?sr_id=x`));
  assert.equal(target.pathname, "/hop/0");
  assert.equal(target.searchParams.get("sr_id"), "x");
  assert.deepEqual(seen.map((s) => [s.method, s.bytes]), Array.from({ length: MAX_REDIRECTS + 1 }, () => ["PUT", 0]));

  const tooFar = await probePut(new URL(`${url}/hop/${MAX_REDIRECTS + 1}`)).catch((error: unknown) => error);
  assert.ok(tooFar instanceof ResourceRefused);
  assert.equal(tooFar.status, 508);
  assert.match(tooFar.message, /redirected it more than 5 times/);
});

test("probePut: a refusal is its status and the toolstack's reason; an unreachable toolstack says so", async (t) => {
  const { url } = await serve(t, (_request, response) => response.writeHead(404).end("HANDLE_INVALID SR OpaqueRef:nope\n"));
  const refused = await probePut(new URL(`${url}/import`), { what: "the import" }).catch((error: unknown) => error);
  assert.ok(refused instanceof ResourceRefused);
  assert.equal(refused.status, 404);
  assert.equal(refused.reason, "HANDLE_INVALID SR OpaqueRef:nope");
  assert.equal(refused.message, "the import refused (HTTP 404): HANDLE_INVALID SR OpaqueRef:nope");
  await assert.rejects(probePut(new URL("http://127.0.0.1:1/import")), /the toolstack at http:\/\/127\.0\.0\.1:1 cannot be reached \(.*ECONNREFUSED/);
});

test("probePut: cancelled while the toolstack says nothing", async (t) => {
  const { url } = await serve(t, () => undefined);
  const abort = new AbortController();
  setTimeout(() => abort.abort(new Error("cancelled by the test")), 50);
  await assert.rejects(probePut(new URL(`${url}/import`), { signal: abort.signal }), /cancelled by the test/);
});

test("putResource: the body streamed whole to the probed URL, the answer after it", async (t) => {
  const { url, seen } = await serve(t, hops);
  const target = await probePut(new URL(`${url}/hop/2`));
  const chunk = Buffer.alloc(1024 * 1024, 7);
  const put = putResource(target, (request) => pipeline(Readable.from(Array.from({ length: 8 }, () => chunk)), request), { length: 8 * chunk.length });
  const response = await put.response;
  assert.equal(response.statusCode, 200);
  assert.equal(response.headers["task-id"], "OpaqueRef:t");
  assert.equal(await put.sent, undefined);
  assert.deepEqual(seen.at(-1), { method: "PUT", path: "/hop/0", bytes: 8 * chunk.length });
});

test("putResource: a body that fails to read fails the request, and says why", async (t) => {
  const { url } = await serve(t, hops);
  const failing = new Readable({
    read() {
      this.destroy(new Error("disk read error"));
    },
  });
  const put = putResource(new URL(`${url}/hop/0`), (request) => pipeline(failing, request), { length: 1024 });
  assert.match(String(await put.sent), /disk read error/);
  await assert.rejects(put.response);
});

test("get: redirects followed as GETs with the caller's headers", async (t) => {
  const { url, seen } = await serve(t, (request, response) => {
    if (request.url === "/export") return void response.writeHead(302, { location: "/elsewhere/export" }).end();
    response.writeHead(200, { "x-accept-encoding": request.headers["accept-encoding"] ?? "" }).end("archive");
  });
  const { url: final, response } = await get(new URL(`${url}/export`), { headers: { "accept-encoding": "identity" } });
  assert.equal(final.pathname, "/elsewhere/export");
  assert.equal(response.headers["x-accept-encoding"], "identity");
  assert.deepEqual(seen.map((s) => s.method), ["GET", "GET"]);
  response.resume();
});
