// Test helper for uploads: the tus route served over real HTTP (Node's request and response, as the Pages API
// route gets them), so a test's PATCH bodies stream through a socket as a browser's do.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { handleUpload, UPLOAD_PATH } from "./tus.ts";

/** handleUpload on a port of 127.0.0.1; the server does not keep the test process alive. */
export async function serveUploads(): Promise<{ url: string }> {
  const server = createServer((req, res) => {
    handleUpload(req, res).catch((error: unknown) => {
      // The route answers every failure itself: one that escapes is a bug the test should show.
      process.stderr.write(`handleUpload threw: ${(error as Error).stack ?? String(error)}\n`);
      res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  server.unref();
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${UPLOAD_PATH}` };
}
