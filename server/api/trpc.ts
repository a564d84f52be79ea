/**
 * tRPC for the console: request context, initialization and the procedure builders every feature router uses.
 * Routers live in `server/api/<feature>/router.ts` and are combined in `server/api/root.ts`.
 */
import { initTRPC } from "@trpc/server";
import { z, ZodError } from "zod";
import { defaultPluginRoot } from "../storage/registry.ts";

/**
 * 1. CONTEXT
 *
 * What every procedure may use. The HTTP handler and the server-component caller both build it from the
 * request headers (the session cookie will travel there once the console has a login).
 */
export interface TRPCContext {
  headers: Headers;
  /** Plugin root to scan; read per request so $HANGAR_PLUGIN_ROOT changes need no rebuild. */
  pluginRoot: string;
}

export function createTRPCContext(opts: { headers: Headers }): TRPCContext {
  return { headers: opts.headers, pluginRoot: defaultPluginRoot() };
}

/**
 * 2. INITIALIZATION
 *
 * Input validation failures carry the zod issues flattened per field, so a form can show them beside its inputs.
 */
const t = initTRPC.context<TRPCContext>().create({
  errorFormatter({ shape, error }) {
    return {
      ...shape,
      data: {
        ...shape.data,
        zodError: error.code === "BAD_REQUEST" && error.cause instanceof ZodError ? z.flattenError(error.cause) : null,
      },
    };
  },
});

/**
 * 3. ROUTERS AND PROCEDURES
 *
 * The console has no login yet, so every procedure is public.
 */
export const createTRPCRouter = t.router;
export const createCallerFactory = t.createCallerFactory;
export const publicProcedure = t.procedure;
