// Charts of an SR's datasources, sampled server-side every 5 s (server/datasources/sampler.ts).
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { readSeries } from "./read-series.ts";
import { ZSeriesResponse, ZSeriesSchema } from "./schema.ts";

export const datasourcesRouter = createTRPCRouter({
  series: authedProcedure
    .input(ZSeriesSchema)
    .output(ZSeriesResponse)
    .query(({ ctx, input }) => readSeries(ctx.xapi, ctx.pluginRoot, input)),
});
