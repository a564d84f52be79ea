// A tus request @tus/server refuses before it reads the body (no session, a bad header, no such upload) must
// not leave that body on a kept-alive connection: the client's next request on it would be read as the rest of
// the body. Found by the console fuzz (e2e/console.fuzz.spec.ts): after a refused PATCH with a 250 kB body, the
// next PATCH on the connection got ECONNRESET.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

const dataDir = mkdtempSync(join(tmpdir(), "hangar-tus-connection-test-"));
process.env.HANGAR_DATA_DIR = dataDir;
process.on("exit", () => rmSync(dataDir, { recursive: true, force: true }));

const { serveUploads } = await import("./testing.ts");
const { url: BASE } = await serveUploads();

/** One request on `agent`: its status, or the error the connection gave. */
function exchange(agent: Agent, method: string, url: string, headers: Record<string, string>, body?: Buffer): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(url, { method, headers: { ...headers, ...(body === undefined ? {} : { "content-length": String(body.length) }) }, agent }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
      res.on("error", (error) => resolve(error.message));
    });
    req.on("error", (error) => resolve((error as NodeJS.ErrnoException).code ?? error.message));
    req.end(body);
  });
}

test("a refused tus request's unread body does not break the next request on the connection", { timeout: 30_000 }, async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const tusHeaders = { "tus-resumable": "1.0.0", "content-type": "application/offset+octet-stream" };
    const cases: [string, string, Record<string, string>][] = [
      // No session: refused before the creation's first bytes are read.
      ["POST", BASE, { "upload-length": "1000000" }],
      // A bad offset, and an id that is no upload's: refused by @tus/server's own checks.
      ["PATCH", `${BASE}/f022.json`, { "upload-offset": "" }],
      ["DELETE", `${BASE}/f022`, {}],
    ];
    for (const [method, url, headers] of cases) {
      const refused = await exchange(agent, method, url, { ...tusHeaders, ...headers }, Buffer.alloc(256 * 1024, 0x41));
      assert.ok(typeof refused === "number" || refused === "ECONNRESET" || refused === "EPIPE", `${method} ${url}: ${refused}`);
      assert.ok(typeof refused !== "number" || (refused >= 400 && refused < 500), `${method} ${url}: HTTP ${refused}`);
      // The next request: its own answer (OPTIONS is answered to anyone), not the end of the last one's body.
      assert.equal(await exchange(agent, "OPTIONS", BASE, {}), 204, `after ${method} ${url}`);
    }
  } finally {
    agent.destroy();
  }
});
