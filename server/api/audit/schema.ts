// What the audit router takes and returns: the trail's rows, newest first, filtered; and whether its chain holds.
import { z } from "zod";
import { ZAuditRow } from "../../xenapi/audit-log.ts";

export const ZAuditListSchema = z.object({
  user: z.string().trim().max(256).optional(),
  action: z.string().trim().max(256).optional(),
  outcome: z.enum(["OK", "ERROR", "DENIED"]).optional(),
  /** ISO 8601 times; rows from `since`, before `until`. */
  since: z.iso.datetime({ offset: true }).optional(),
  until: z.iso.datetime({ offset: true }).optional(),
  limit: z.number().int().min(1).max(2000).default(500),
});

/** A row of the trail as the page shows it: the wire row's fields, the subject named, the arguments in words. */
export const ZAuditEntry = ZAuditRow.pick({ id: true, time: true, host: true, client: true, decision: true, outcome: true, kind: true, action: true }).extend({
  user: z.string(),
  subject: z.string(),
  /** The arguments kept, in words: `self: web01 (uuid)`. */
  args: z.array(z.string()),
});

export const ZAuditListResponse = z.object({ entries: z.array(ZAuditEntry), more: z.boolean() });

export const ZAuditVerifyResponse = z.object({
  ok: z.boolean(),
  rows: z.number(),
  first: z.string().nullable(),
  last: z.string().nullable(),
  head: z.string().nullable(),
  reason: z.string().nullable(),
});

export type TAuditEntry = z.infer<typeof ZAuditEntry>;
export type TAuditList = z.infer<typeof ZAuditListSchema>;
