// tus resumable uploads of VM archives (server/transfers/upload): every method goes to the tus server, which
// checks the console session itself. Bodies stream: this route is outside proxy.ts's matcher.
import { handleUpload } from "@/server/transfers/upload/tus.ts";

export const runtime = "nodejs";
export const dynamic = "force-dynamic";

const handler = (req: Request) => handleUpload(req);

export { handler as GET, handler as HEAD, handler as POST, handler as PATCH, handler as DELETE, handler as OPTIONS };
