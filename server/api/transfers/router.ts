// Transfers: the user's uploads (VM imports while uploading) with their import tasks.
import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { listUploads } from "./list-uploads.ts";
import { ZListUploadsResponse, ZListUploadsSchema } from "./schema.ts";

export const transfersRouter = createTRPCRouter({
  uploads: authedProcedure
    .input(ZListUploadsSchema)
    .output(ZListUploadsResponse)
    .query(({ ctx, input }) => listUploads(ctx.xapi, ctx.session.user, input?.ids)),
});
