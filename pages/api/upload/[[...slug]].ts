// tus resumable uploads of VM archives (server/transfers/upload). A Pages API route, not an App Router
// handler: it gets Node's own request, so an upload's bytes go from the socket into the spool without the
// web-stream hops an App Router handler adds. Kept out of proxy.ts (it skips /api/), which would buffer bodies.
import type { NextApiRequest, NextApiResponse } from "next";
import { handleUpload } from "@/server/transfers/upload/tus.ts";

export const config = {
  // The body is the upload's bytes, read by the tus endpoint; its answers are small.
  api: { bodyParser: false, externalResolver: true },
};

export default async function handler(request: NextApiRequest, response: NextApiResponse): Promise<void> {
  await handleUpload(request, response);
}
