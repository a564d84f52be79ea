// VM export downloads through the console (server/transfers/download/serve.ts). A Pages API route, not an App
// Router handler: it gets Node's own response, so Content-Length reaches the browser (its download manager
// shows the size and time left) and the spool is piped without a web-stream hop. Kept out of proxy.ts (it
// skips /api/), so nothing buffers the archive on its way out.
import type { NextApiRequest, NextApiResponse } from "next";
import { serveExportDownload } from "@/server/transfers/download/serve.ts";

export const config = {
  // No body to parse; and an archive is far past the 4 MB response size Next warns about.
  api: { bodyParser: false, responseLimit: false },
};

export default async function handler(request: NextApiRequest, response: NextApiResponse): Promise<void> {
  await serveExportDownload(request, response, String(request.query.file ?? ""));
}
