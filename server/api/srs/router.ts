// Storage repositories: listing and one SR's page (reads: toolstack records, live SR.stat from the plugin),
// the SR types one can create (Plugin.query), and every change as a toolstack task.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { createSr } from "./create-sr.ts";
import { getSr } from "./get-sr.ts";
import { listSrTypes } from "./list-sr-types.ts";
import { listSrs } from "./list-srs.ts";
import { probeSr } from "./probe-sr.ts";
import {
  ZCreateSrResponse,
  ZCreateSrSchema,
  ZForgetSrSchema,
  ZListSrsSchema,
  ZGetSrResponse,
  ZGetSrSchema,
  ZListSrsResponse,
  ZListSrTypesResponse,
  ZProbeSrResponse,
  ZProbeSrSchema,
  ZSrActionResponse,
  ZSrRefSchema,
} from "./schema.ts";
import { attachSr, destroySr, detachSr, forgetSr, setDefaultSr } from "./sr-actions.ts";

export const srsRouter = createTRPCRouter({
  list: authedProcedure
    .input(ZListSrsSchema)
    .output(ZListSrsResponse)
    .query(({ ctx, input }) => listSrs(ctx.xapi, ctx.pluginRoot, { volumeCounts: input?.volumeCounts ?? true })),
  get: authedProcedure
    .input(ZGetSrSchema)
    .output(ZGetSrResponse)
    .query(({ ctx, input }) => getSr(ctx.xapi, ctx.pluginRoot, input.sr)),
  types: authedProcedure.output(ZListSrTypesResponse).query(({ ctx }) => listSrTypes(ctx.xapi, ctx.pluginRoot)),
  probe: authedProcedure
    .input(ZProbeSrSchema)
    .output(ZProbeSrResponse)
    .mutation(({ ctx, input }) => probeSr(ctx.xapi, input.type, input.deviceConfig)),
  create: authedProcedure
    .input(ZCreateSrSchema)
    .output(ZCreateSrResponse)
    .mutation(({ ctx, input }) => createSr(ctx.xapi, input)),
  setDefault: authedProcedure
    .input(ZSrRefSchema)
    .output(ZSrActionResponse)
    .mutation(({ ctx, input }) => setDefaultSr(ctx.xapi, input.sr)),
  attach: authedProcedure
    .input(ZSrRefSchema)
    .output(ZSrActionResponse)
    .mutation(({ ctx, input }) => attachSr(ctx.xapi, input.sr)),
  detach: authedProcedure
    .input(ZSrRefSchema)
    .output(ZSrActionResponse)
    .mutation(({ ctx, input }) => detachSr(ctx.xapi, input.sr)),
  forget: authedProcedure
    .input(ZForgetSrSchema)
    .output(ZSrActionResponse)
    .mutation(({ ctx, input }) => forgetSr(ctx.xapi, input.sr, input.detachFirst)),
  destroy: authedProcedure
    .input(ZSrRefSchema)
    .output(ZSrActionResponse)
    .mutation(({ ctx, input }) => destroySr(ctx.xapi, input.sr)),
});
