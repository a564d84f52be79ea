/**
 * tRPC for the console: request context, initialization and the procedure builders every feature router uses.
 * Routers live in `server/api/<feature>/router.ts` and are combined in `server/api/root.ts`.
 */
import "server-only";

import { initTRPC, TRPCError } from "@trpc/server";
import { z, ZodError } from "zod";
import { browserAddress, type ConsoleSession, clientFor, sessionFromHeaders } from "../auth/session.ts";
import { defaultPluginRoot } from "../storage/registry.ts";
import type { XenApiClient } from "../xenapi/client.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { consoleError } from "./xenapi-error.ts";
import { accessOf } from "../auth/access.ts";
import { verdict } from "../../lib/access.ts";
import type { ConsoleAction } from "../../lib/console-actions.ts";

/**
 * 1. CONTEXT
 *
 * What every procedure may use. The HTTP handler and the server-component caller both build it from the
 * request headers, where the session cookie travels.
 */
export interface TRPCContext {
  headers: Headers;
  /** Plugin root to scan; read per request so $HANGAR_PLUGIN_ROOT changes need no rebuild. */
  pluginRoot: string;
  /** The logged-in user's toolstack session, from the sealed cookie; undefined for an anonymous caller. */
  session: ConsoleSession | undefined;
}

export function createTRPCContext(opts: { headers: Headers }): TRPCContext {
  return { headers: opts.headers, pluginRoot: defaultPluginRoot(), session: sessionFromHeaders(opts.headers) };
}

/**
 * 2. INITIALIZATION
 *
 * Input validation failures carry the zod issues flattened per field, so a form can show them beside its inputs.
 * A toolstack failure also carries its XenAPI code, for the UI to branch on.
 */
const t = initTRPC.context<TRPCContext>().create({
  errorFormatter({ shape, error }) {
    const xenapi = error.cause !== undefined && error.cause !== null && "code" in error.cause && error.cause.name === "XenApiError" ? String(error.cause.code) : null;
    return {
      ...shape,
      data: {
        ...shape.data,
        xenapi,
        zodError: error.code === "BAD_REQUEST" && error.cause instanceof ZodError ? z.flattenError(error.cause) : null,
      },
    };
  },
});

/**
 * 3. ROUTERS AND PROCEDURES
 */
export const createTRPCRouter = t.router;
export const createCallerFactory = t.createCallerFactory;

/** For what anyone may see: nothing but the login itself. */
export const publicProcedure = t.procedure;

/**
 * For everything else: refuses an anonymous caller (UNAUTHORIZED), gives the procedure `ctx.xapi`, a XenAPI
 * client on the user's toolstack session, and turns toolstack failures into messages in words (an expired
 * session is UNAUTHORIZED too, so the browser returns to the login page).
 */
export const authedProcedure = t.procedure.use(async ({ ctx, next }) => {
  if (ctx.session === undefined) throw new TRPCError({ code: "UNAUTHORIZED", message: "Log in to use the console." });
  const xapi: XenApiClient = clientFor(ctx.session, browserAddress(ctx.headers));
  // The cookie says who logged in, not that the session still holds: the toolstack is asked first, so that a
  // procedure that never asks it (plugins, conformance, uploads) refuses a session logged out since as the
  // others do. A toolstack that does not answer leaves that to the procedure (its own words, SERVICE_UNAVAILABLE).
  try {
    await xapi.call(z.string(), "session.get_uuid", ctx.session.session);
  } catch (error) {
    if (error instanceof XenApiError && error.code === "SESSION_INVALID") throw consoleError(error);
  }
  const result = await next({ ctx: { ...ctx, session: ctx.session, xapi } });
  if (!result.ok) throw consoleError(result.error);
  return result;
});

/**
 * For an action the console does itself (an upload, a conformance run) rather than through a toolstack call
 * that judges it: refused (FORBIDDEN, in words) unless the user's role allows it.
 */
export function actionProcedure(action: ConsoleAction) {
  return authedProcedure.use(async ({ ctx, next }) => {
    const judged = verdict(await accessOf(ctx.session, ctx.xapi), action);
    if (!judged.allowed) throw new TRPCError({ code: "FORBIDDEN", message: judged.reason });
    return next();
  });
}
