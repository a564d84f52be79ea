// The bare tus sink of the "Chromium alone" row (browser-ceiling.ts), run as a process of its own: it serves
// the page and counts each PATCH's bytes and drops them. On its own so that its CPU is not the bench's (the
// bench process, with Playwright in it, spent 3.5 CPU-s per GiB on these bytes, most of it collecting its
// large heap), and with the console's V8 settings (bin/node24.sh): what Chromium reaches into it is the
// most any console could. Prints its URL on the first line of its output.
import { createReadStream } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";

const CHUNK = 8 * 1024 * 1024;
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
function serveSink(): void {
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
  server.listen(0, "127.0.0.1", () => process.stdout.write(`http://127.0.0.1:${(server.address() as { port: number }).port}\n`));
}

serveSink();

