// Conformance checks from the console: a run against a volume plugin of the plugin root is a job (it takes
// tens of seconds), started here and polled by id; its results arrive check by check.
import "server-only";

import { actionProcedure, createTRPCRouter, authedProcedure } from "../trpc.ts";
import { cancelRun, getRun, listRuns, startRun } from "./runs.ts";
import { ZConformanceRun, ZConformanceRunIdSchema, ZConformanceRunsResponse, ZConformanceRunsSchema, ZStartConformanceSchema } from "./schema.ts";

export const conformanceRouter = createTRPCRouter({
  run: actionProcedure("conformance.run")
    .input(ZStartConformanceSchema)
    .output(ZConformanceRun)
    .mutation(({ ctx, input }) => startRun(ctx.pluginRoot, input)),

  get: authedProcedure
    .input(ZConformanceRunIdSchema)
    .output(ZConformanceRun)
    .query(({ input }) => getRun(input.id)),

  runs: authedProcedure
    .input(ZConformanceRunsSchema)
    .output(ZConformanceRunsResponse)
    .query(({ input }) => ({ runs: listRuns(input.plugin) })),

  cancel: actionProcedure("conformance.run")
    .input(ZConformanceRunIdSchema)
    .output(ZConformanceRun)
    .mutation(({ input }) => cancelRun(input.id)),
});
