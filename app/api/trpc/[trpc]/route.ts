import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { appRouter } from "@/server/api/root.ts";
import { createTRPCContext } from "@/server/api/trpc.ts";

function handler(req: Request): Promise<Response> {
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    createContext: () => createTRPCContext({ headers: req.headers }),
    onError({ path, error }) {
      // Client mistakes (bad input, unknown plugin) are answered, not logged; everything else an operator may need.
      if (error.code !== "BAD_REQUEST" && error.code !== "NOT_FOUND") {
        console.error(`tRPC ${path ?? "<no path>"} failed: ${error.message}`);
      }
    },
  });
}

export { handler as GET, handler as POST };
