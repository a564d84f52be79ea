// How fast Chromium itself uploads on this machine: the same file, through the same tus-js-client and 8 MiB
// PATCHes the console's page uses, into a bare Node server that counts the bytes and drops them (no Next, no
// spool, no import). What it reaches is the most any console could, so the upload row's ratio reads against it.
import { createReadStream } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";
import type { Browser } from "@playwright/test";
import { treeCpuSeconds } from "./process-tree.ts";

const CHUNK = 8 * 1024 * 1024;
const TIMEOUT_MS = 30 * 60_000;
const TUS_JS = join(import.meta.dirname, "..", "..", "node_modules", "tus-js-client", "dist", "tus.min.js");

const PAGE = `<!doctype html><meta charset="utf-8"><title>ready</title>
<input type="file" aria-label="file">
<script src="/tus.min.js"></script>
<script>
document.querySelector("input").addEventListener("change", (event) => {
  const file = event.target.files[0];
  new tus.Upload(file, {
    endpoint: "/files/", chunkSize: ${CHUNK}, retryDelays: [],
    metadata: { filename: file.name },
    onSuccess: () => { document.title = "done"; },
    onError: (error) => { document.title = "error: " + error; },
  }).start();
});
</script>`;

/** A tus server that keeps nothing: each PATCH's bytes are counted and dropped. */
function sink(): Promise<{ url: string; close: () => void }> {
  const uploads = new Map<string, { length: number; offset: number }>();
  let next = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://sink");
    const tus = { "tus-resumable": "1.0.0" };
    if (request.method === "GET" && url.pathname === "/") return void response.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    if (request.method === "GET" && url.pathname === "/tus.min.js") {
      response.writeHead(200, { "content-type": "text/javascript" });
      return void createReadStream(TUS_JS).pipe(response);
    }
    if (request.method === "POST" && url.pathname === "/files/") {
      const id = String(++next);
      uploads.set(id, { length: Number(request.headers["upload-length"]), offset: 0 });
      return void response.writeHead(201, { ...tus, location: `/files/${id}` }).end();
    }
    const upload = uploads.get(url.pathname.replace("/files/", ""));
    if (upload === undefined) return void response.writeHead(404, tus).end();
    if (request.method === "HEAD") return void response.writeHead(200, { ...tus, "upload-offset": String(upload.offset), "upload-length": String(upload.length), "cache-control": "no-store" }).end();
    if (request.method === "PATCH") {
      request.on("data", (chunk: Buffer) => (upload.offset += chunk.length));
      request.on("end", () => response.writeHead(204, { ...tus, "upload-offset": String(upload.offset) }).end());
      return;
    }
    response.writeHead(405, tus).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() })));
}

export interface CeilingRun {
  seconds: number;
  /** Chromium's CPU seconds (its process tree) during the upload. */
  chromiumCpu: number;
  /** The sink's (this process's) CPU seconds meanwhile. */
  sinkCpu: number;
}

/** One upload of `file` from a fresh context of `browser` into the sink, timed from the choice to the last PATCH answered. */
export async function browserCeiling(browser: Browser, chromiumPid: number, file: string): Promise<CeilingRun> {
  const server = await sink();
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(server.url);
    const chromium = () => treeCpuSeconds(chromiumPid);
    const cpu0 = chromium();
    const own0 = process.cpuUsage();
    const started = performance.now();
    await page.getByLabel("file").setInputFiles(file);
    await page.waitForFunction(() => document.title !== "ready", undefined, { timeout: TIMEOUT_MS, polling: 100 });
    const seconds = (performance.now() - started) / 1000;
    const title = await page.title();
    if (title !== "done") throw new Error(`the bare upload failed: ${title}`);
    const own = process.cpuUsage(own0);
    return { seconds, chromiumCpu: chromium() - cpu0, sinkCpu: (own.user + own.system) / 1e6 };
  } finally {
    await context.close();
    server.close();
  }
}
