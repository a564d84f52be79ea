// VM export downloads through the console (server/transfers/download/serve.ts). Kept out of proxy.ts (it skips
// /api/), so nothing buffers the archive on its way out.
import { serveExportDownload } from "@/server/transfers/download/serve.ts";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

type Context = { params: Promise<{ file: string }> };

export async function GET(request: Request, context: Context): Promise<Response> {
  return serveExportDownload(request, (await context.params).file);
}

export async function HEAD(request: Request, context: Context): Promise<Response> {
  return serveExportDownload(request, (await context.params).file);
}
