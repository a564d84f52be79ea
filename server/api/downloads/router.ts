// Export downloads: the Export dialog starts one (a task and the console route's URL) and follows its progress.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { exportProgress, startExport } from "./export.ts";
import { ZExportProgressResponse, ZExportProgressSchema, ZStartExportResponse, ZStartExportSchema } from "./schema.ts";

export const downloadsRouter = createTRPCRouter({
  startExport: authedProcedure
    .input(ZStartExportSchema)
    .output(ZStartExportResponse)
    .mutation(({ ctx, input }) => startExport(ctx.xapi, input.vmRef, input.compression)),
  exportProgress: authedProcedure
    .input(ZExportProgressSchema)
    .output(ZExportProgressResponse)
    .query(({ ctx, input }) => exportProgress(ctx.xapi, input.task)),
});
