import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { buffer } from "node:stream/consumers";
import { test } from "node:test";
import { UrlFetchError, fetchUrl, refusedAddress } from "./url-fetch.ts";

/** A real HTTP server on 127.0.0.1 for the test, stopped after it. */
async function serve(t: { after(fn: () => unknown): void }, handler: Parameters<typeof createServer>[1]): Promise<string> {
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const data = Buffer.alloc(300_000, 7);
const local = { maxBytes: 1 << 20, allowLocal: true };

function refusal(pattern: RegExp) {
  return (error: unknown) => error instanceof UrlFetchError && pattern.test(error.message);
}

test("loopback, link-local, unspecified and the host's own addresses are refused; others are not", () => {
  for (const address of ["127.0.0.1", "127.9.9.9", "169.254.169.254", "0.0.0.0", "::1", "fe80::1", "::ffff:127.0.0.1"]) assert.ok(refusedAddress(address), address);
  for (const address of ["8.8.8.8", "192.0.2.10", "2001:db8::1"]) assert.equal(refusedAddress(address), undefined, address);
});

test("a local server is refused by default, with the setting that allows it named", async (t) => {
  const url = await serve(t, (_req, res) => res.end("x"));
  await assert.rejects(fetchUrl(url, { maxBytes: 10 }), refusal(/loopback.*HANGAR_URL_IMPORT_ALLOW_LOCAL=1/));
  await assert.rejects(fetchUrl(url.replace("127.0.0.1", "localhost"), { maxBytes: 10 }), refusal(/localhost resolves to .* loopback/));
});

test("the body streams with its size; redirects are followed and checked; errors say what happened", async (t) => {
  const url = await serve(t, (req, res) => {
    if (req.url === "/disk.xva") return res.writeHead(200, { "content-length": data.length }).end(data);
    if (req.url === "/moved") return res.writeHead(302, { location: "/disk.xva" }).end();
    if (req.url === "/loop") return res.writeHead(302, { location: "/loop" }).end();
    if (req.url === "/away") return res.writeHead(301, { location: "ftp://example.org/x" }).end();
    res.writeHead(404).end();
  });
  const direct = await fetchUrl(`${url}/disk.xva`, local);
  assert.equal(direct.size, data.length);
  assert.deepEqual(await buffer(direct.body), data);
  const moved = await fetchUrl(`${url}/moved`, local);
  assert.equal(moved.url, `${url}/disk.xva`);
  assert.deepEqual(await buffer(moved.body), data);
  await assert.rejects(fetchUrl(`${url}/loop`, local), refusal(/more than 5 redirects/));
  await assert.rejects(fetchUrl(`${url}/away`, local), refusal(/only http:\/\/ and https:\/\//));
  await assert.rejects(fetchUrl(`${url}/nothing`, local), refusal(/answered HTTP 404/));
  await assert.rejects(fetchUrl("ftp://example.org/a.xva", local), refusal(/only http/));
  await assert.rejects(fetchUrl("http://user:secret@example.org/a.xva", local), refusal(/credentials/));
  await assert.rejects(fetchUrl("not a url", local), refusal(/is not a URL/));
});

test("sizes past the limit are refused: at once by Content-Length, on the way without one", async (t) => {
  const url = await serve(t, (req, res) => {
    if (req.url === "/chunked") {
      res.write(data);
      return res.end(data);
    }
    res.writeHead(200, { "content-length": data.length }).end(data);
  });
  await assert.rejects(fetchUrl(`${url}/sized`, { ...local, maxBytes: 1000 }), refusal(/300000 bytes, more than the 1000 allowed/));
  const chunked = await fetchUrl(`${url}/chunked`, { ...local, maxBytes: data.length + 10 });
  assert.equal(chunked.size, undefined);
  await assert.rejects(buffer(chunked.body), refusal(/sent more than the 300010 bytes allowed/));
});

test("a server that never answers, or stops sending, times out with a message", async (t) => {
  const url = await serve(t, (req, res) => {
    if (req.url === "/stall") {
      res.writeHead(200, { "content-length": 10 });
      res.write("12345");
    }
    // "/silent": no answer at all.
  });
  await assert.rejects(fetchUrl(`${url}/silent`, { ...local, connectTimeoutMs: 300 }), refusal(/did not answer within 0.3 s/));
  const stalled = await fetchUrl(`${url}/stall`, { ...local, idleTimeoutMs: 300 });
  await assert.rejects(buffer(stalled.body), refusal(/sent nothing for 0.3 s/));
});
