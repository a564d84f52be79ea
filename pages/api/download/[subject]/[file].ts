// Export downloads through the console (server/transfers/download/serve.ts): /api/download/vm/<uuid>.xva|.ova, a
// VM; /api/download/vdi/<uuid>.raw|.vhd|.qcow2|.vmdk, a disk. A Pages API route, not an App Router handler: it
// gets Node's own response, so Content-Length reaches the browser (its download manager shows the size and time
// left) and the spool is piped without a web-stream hop. Kept out of proxy.ts (it skips /api/), so nothing
// buffers the archive on its way out.
import type { NextApiRequest, NextApiResponse } from "next";
import { serveExportDownload } from "@/server/transfers/download/serve.ts";

export const config = {
  // No body to parse; and an archive is far past the 4 MB response size Next warns about.
  api: { bodyParser: false, responseLimit: false },
};

export default async function handler(request: NextApiRequest, response: NextApiResponse): Promise<void> {
  const subject = String(request.query.subject ?? "");
  if (subject !== "vm" && subject !== "vdi") {
    response.status(404).setHeader("content-type", "text/plain; charset=utf-8").end("There is no such download: the addresses are /api/download/vm/<VM UUID>.xva or .ova, and /api/download/vdi/<VDI UUID>.raw, .vhd, .qcow2 or .vmdk.\n");
    return;
  }
  await serveExportDownload(request, response, subject, String(request.query.file ?? ""));
}
