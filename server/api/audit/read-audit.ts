// The audit trail as the Audit page shows it, read from the toolstack's GET /audit_log (its JSON rows, newest
// first, filtered there), and the chain's verification.
import "server-only";

import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { toolstackUrl } from "../../config.ts";
import type { ConsoleSession } from "../../auth/session.ts";
import { type AuditArg, ZAuditRow } from "../../xenapi/audit-log.ts";
import { resourceUrl } from "../../xenapi/resource.ts";
import type { ZAuditEntry, ZAuditListSchema } from "./schema.ts";


async function fetchLog(session: ConsoleSession, query: Record<string, string | undefined>): Promise<Response> {
  const response = await fetch(resourceUrl(toolstackUrl(), session.session, "audit_log", query));
  if (response.status === 403) throw new TRPCError({ code: "FORBIDDEN", message: (await response.text()).trim() });
  if (!response.ok || response.body === null) throw new TRPCError({ code: "INTERNAL_SERVER_ERROR", message: `The toolstack's audit log answered ${response.status}: ${(await response.text()).trim()}` });
  return response;
}

function words(arg: AuditArg): string {
  if (arg.length === 2) return `${arg[0]}: ${arg[1]}`;
  const [name, label, uuid, ref] = arg;
  return `${name}: ${label || ref}${uuid ? ` (${uuid})` : ""}`;
}

export async function listAudit(session: ConsoleSession, input: z.infer<typeof ZAuditListSchema>): Promise<{ entries: z.infer<typeof ZAuditEntry>[]; more: boolean }> {
  const response = await fetchLog(session, {
    format: "json",
    newest_first: "true",
    limit: String(input.limit + 1),
    user: input.user || undefined,
    action: input.action || undefined,
    decision: input.outcome === "DENIED" ? "DENIED" : undefined,
    outcome: input.outcome === "DENIED" ? undefined : input.outcome,
    since: input.since,
    until: input.until,
  });
  const entries: z.infer<typeof ZAuditEntry>[] = [];
  for await (const line of createInterface({ input: Readable.fromWeb(response.body as WebReadableStream<Uint8Array>), crlfDelay: Infinity })) {
    if (line === "") continue;
    const row = ZAuditRow.parse(JSON.parse(line));
    entries.push({ id: row.id, time: row.time, host: row.host, user: row.subject_name, subject: row.subject_sid, client: row.client, decision: row.decision, outcome: row.outcome, kind: row.kind, action: row.action, args: (JSON.parse(row.args) as AuditArg[]).map(words) });
  }
  return { entries: entries.slice(0, input.limit), more: entries.length > input.limit };
}

const ZVerification = z.object({ ok: z.boolean(), rows: z.number(), first: z.string().nullish(), last: z.string().nullish(), head: z.string().nullish(), reason: z.string().nullish() });

export async function verifyAudit(session: ConsoleSession) {
  const result = ZVerification.parse(await (await fetchLog(session, { verify: "true" })).json());
  return { ok: result.ok, rows: result.rows, first: result.first ?? null, last: result.last ?? null, head: result.head ?? null, reason: result.reason ?? null };
}
