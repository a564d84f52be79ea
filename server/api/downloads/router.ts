// Export downloads: the Export dialog starts a VM's, a volume's menu a disk's (a task and the console route's
// URL), and either follows its progress.
import "server-only";

import { actionProcedure, authedProcedure, createTRPCRouter } from "../trpc.ts";
import { exportProgress, startDiskExport, startExport } from "./export.ts";
import { ZExportProgressResponse, ZExportProgressSchema, ZStartDiskExportSchema, ZStartExportResponse, ZStartExportSchema } from "./schema.ts";

export const downloadsRouter = createTRPCRouter({
  startExport: actionProcedure("vms.export")
    .input(ZStartExportSchema)
    .output(ZStartExportResponse)
    .mutation(({ ctx, input }) => startExport(ctx.xapi, input.vmRef, input.compression, input.format)),
  startDiskExport: actionProcedure("volumes.download")
    .input(ZStartDiskExportSchema)
    .output(ZStartExportResponse)
    .mutation(({ ctx, input }) => startDiskExport(ctx.xapi, input)),
  exportProgress: authedProcedure
    .input(ZExportProgressSchema)
    .output(ZExportProgressResponse)
    .query(({ ctx, input }) => exportProgress(ctx.xapi, input.task)),
});
