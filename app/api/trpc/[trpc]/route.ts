import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { appRouter } from "@/server/api/root.ts";
import { createTRPCContext } from "@/server/api/trpc.ts";
import { crossSiteRefusal } from "@/server/auth/origin.ts";

async function handler(req: Request): Promise<Response> {
  const refused = crossSiteRefusal(req.method, req.headers);
  if (refused !== undefined) return Response.json({ error: { message: refused, code: -32003, data: { code: "FORBIDDEN", httpStatus: 403 } } }, { status: 403 });
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    createContext: () => createTRPCContext({ headers: req.headers }),
    onError({ path, error }) {
      // Client mistakes (bad input, unknown object, no session) are answered, not logged; the rest an operator may need.
      if (!["BAD_REQUEST", "NOT_FOUND", "UNAUTHORIZED", "FORBIDDEN", "CONFLICT", "PRECONDITION_FAILED"].includes(error.code)) {
        console.error(`tRPC ${path ?? "<no path>"} failed: ${error.message}`);
      }
    },
  });
}

export { handler as GET, handler as POST };
