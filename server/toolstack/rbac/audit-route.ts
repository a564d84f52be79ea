// GET /audit_log: the trail as xapi serves its audit.log (text/plain, a line per row, oldest first, from
// `since`, ISO 8601 or xapi's compact form); Hangar's `format=json` gives the rows whole (hashes included, one
// JSON object a line) with filters, newest first on request, and `verify=true` checks the chain.
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { parseArguments, resource } from "../transfer/http-resource.ts";
import { auditLine } from "../../xenapi/audit-log.ts";
import type { AuditQuery } from "./audit.ts";

/** xapi takes `20090910T11:31:11.417`, `2009-09-10T11:31:11.417Z`, `2009-09-10 11:31`, `2009-09-10`. */
const zWhen = z
  .string()
  .max(40)
  .transform((text, ctx) => {
    const compact = /^(\d{4})(\d{2})(\d{2})(T.*)?$/.exec(text);
    const iso = compact === null ? text.replace(" ", "T") : `${compact[1]}-${compact[2]}-${compact[3]}${compact[4] ?? ""}`;
    const date = new Date(/[zZ]|[+-]\d{2}:?\d{2}$/.test(iso) || !iso.includes("T") ? iso : `${iso}Z`);
    if (Number.isNaN(date.getTime())) {
      ctx.addIssue({ code: "custom", message: "not a date (ISO 8601, e.g. 2026-12-01T00:00:00Z)" });
      return z.NEVER;
    }
    return date.toISOString();
  });

const ZAuditQuery = z.object({
  since: zWhen.optional(),
  until: zWhen.optional(),
  format: z.enum(["text", "json"]).default("text"),
  user: z.string().max(256).optional(),
  action: z.string().max(256).optional(),
  decision: z.enum(["ALLOWED", "DENIED"]).optional(),
  outcome: z.enum(["OK", "ERROR"]).optional(),
  limit: z.coerce.number().int().min(1).max(100_000).optional(),
  newest_first: z.enum(["true", "false"]).optional(),
  verify: z.enum(["true", "false"]).optional(),
});

export const auditLogRoute = resource(["GET", "HEAD"], async (ts, request, response, _url, args) => {
  const query = parseArguments(ZAuditQuery, args);
  if (query.verify === "true") {
    const result = await ts.audit.verify();
    const body = `${JSON.stringify(result.ok ? { ok: true, rows: result.rows, first: result.first?.time ?? null, last: result.last?.time ?? null, head: result.last?.hash ?? null } : { ok: false, rows: result.rows, reason: result.reason, row: result.broken?.id ?? null })}\n`;
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body), "cache-control": "no-store" });
    response.end(request.method === "HEAD" ? undefined : body);
    return;
  }
  const json = query.format === "json";
  response.writeHead(200, { "content-type": json ? "application/x-ndjson" : "text/plain; charset=utf-8", "cache-control": "no-store" });
  if (request.method === "HEAD") return void response.end();
  const filter: AuditQuery = { since: query.since, until: query.until, user: query.user, action: query.action, decision: query.decision, outcome: query.outcome, limit: query.limit, newestFirst: query.newest_first === "true" };
  const lines = async function* () {
    for await (const row of ts.audit.rows(filter)) yield `${json ? JSON.stringify(row) : auditLine(row)}\n`;
  };
  // A client that goes away ends the reading; nothing is left to answer.
  await pipeline(Readable.from(lines()), response).catch(() => undefined);
});
