// Transfers: the user's uploads (VM imports while uploading) with their import tasks.
import "server-only";

import { actionProcedure, authedProcedure, createTRPCRouter } from "../trpc.ts";
import { cancelTransfer, importFromUrl } from "./import-url.ts";
import { listUploads } from "./list-uploads.ts";
import { ZCancelTransferResponse, ZCancelTransferSchema, ZImportFromUrlResponse, ZImportFromUrlSchema, ZListUploadsResponse, ZListUploadsSchema } from "./schema.ts";

export const transfersRouter = createTRPCRouter({
  uploads: authedProcedure
    .input(ZListUploadsSchema)
    .output(ZListUploadsResponse)
    .query(({ ctx, input }) => listUploads(ctx.xapi, ctx.session, input?.ids)),
  /** The console fetches an http(s) URL into the same pipeline as an upload. */
  importFromUrl: actionProcedure("vms.import")
    .input(ZImportFromUrlSchema)
    .output(ZImportFromUrlResponse)
    .mutation(({ ctx, input }) => importFromUrl(ctx.xapi, ctx.session, input)),
  /** Cancels an import from URL. */
  cancel: authedProcedure
    .input(ZCancelTransferSchema)
    .output(ZCancelTransferResponse)
    .mutation(({ ctx, input }) => cancelTransfer(ctx.session.user, input.id)),
});
