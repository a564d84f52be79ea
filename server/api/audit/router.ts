// The audit trail for the Audit page (read-only and up): rows with filters, and whether the chain holds.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { listAudit, verifyAudit } from "./read-audit.ts";
import { ZAuditListResponse, ZAuditListSchema, ZAuditVerifyResponse } from "./schema.ts";

export const auditRouter = createTRPCRouter({
  list: authedProcedure
    .input(ZAuditListSchema)
    .output(ZAuditListResponse)
    .query(({ ctx, input }) => listAudit(ctx.session, input)),
  verify: authedProcedure.output(ZAuditVerifyResponse).query(({ ctx }) => verifyAudit(ctx.session)),
});
