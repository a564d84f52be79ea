// tus resumable uploads of VM archives (server/transfers/upload). A Pages API route, not an App Router
// handler: it gets Node's own request, so an upload's bytes go from the socket into the spool without the
// web-stream hops an App Router handler adds. Kept out of proxy.ts (it skips /api/), which would buffer bodies.
import type { NextApiRequest, NextApiResponse } from "next";
import { crossSiteRefusal } from "@/server/auth/origin.ts";
import { handleUpload } from "@/server/transfers/upload/tus.ts";
import { webHeaders } from "@/server/web-headers.ts";

export const config = {
  // The body is the upload's bytes, read by the tus endpoint; its answers are small.
  api: { bodyParser: false, externalResolver: true },
};

export default async function handler(request: NextApiRequest, response: NextApiResponse): Promise<void> {
  const refused = crossSiteRefusal(request.method ?? "GET", webHeaders(request));
  if (refused !== undefined) {
    request.resume();
    response.status(403).setHeader("content-type", "text/plain; charset=utf-8").setHeader("connection", "close").end(`${refused}\n`);
    return;
  }
  await handleUpload(request, response);
}
