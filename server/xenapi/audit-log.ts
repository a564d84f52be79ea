// The audit trail's rows as GET /audit_log serves them (`format=json`, one a line) and as xapi's audit.log
// prints them (a line each), and the hash chain that links them: each row's hash covers the hash of the row
// before and every field of its own, so whoever reads the rows can check that none was edited or removed.
import { createHash } from "node:crypto";
import { z } from "zod";

export type Decision = "ALLOWED" | "DENIED";
/** A value kept as it is: [name, value]; a ref, named: [name, label, uuid, ref]. */
export type AuditArg = [string, string] | [string, string, string, string];

export interface AuditRow {
  id: number;
  time: string;
  host: string;
  trackid: string;
  subject_sid: string;
  subject_name: string;
  client: string;
  decision: Decision;
  outcome: string;
  kind: "API" | "HTTP";
  action: string;
  args: string;
  prev_hash: string;
  hash: string;
}

/** A row as GET /audit_log?format=json answers it (readers check what they are given). */
export const ZAuditRow = z.object({
  id: z.number(),
  time: z.string(),
  host: z.string(),
  trackid: z.string(),
  subject_sid: z.string(),
  subject_name: z.string(),
  client: z.string(),
  decision: z.enum(["ALLOWED", "DENIED"]),
  outcome: z.string(),
  kind: z.enum(["API", "HTTP"]),
  action: z.string(),
  args: z.string(),
  prev_hash: z.string(),
  hash: z.string(),
}) satisfies z.ZodType<AuditRow>;

/** The hash before the first row. */
export const GENESIS = "0".repeat(64);

/** The hash of a row: over the one before's hash and every field of its own, in a fixed order. */
export function rowHash(row: Omit<AuditRow, "hash">): string {
  const fields = [row.id, row.time, row.host, row.trackid, row.subject_sid, row.subject_name, row.client, row.decision, row.outcome, row.kind, row.action, row.args];
  return createHash("sha256").update(row.prev_hash).update("\n").update(JSON.stringify(fields)).digest("hex");
}

/** How a chain check went: every row checked, or the first that breaks it. */
export type Verification = { ok: true; rows: number; first?: AuditRow; last?: AuditRow } | { ok: false; rows: number; broken: AuditRow | undefined; reason: string };

/**
 * Checks a chain of rows, oldest first: each row's hash, and that it follows the row before. A row edited fails
 * its own hash; a row removed leaves the next one pointing at a hash that is not the one before it. The oldest
 * row kept starts the chain (older ones go with the retention).
 */
export async function verifyChain(rows: AsyncIterable<AuditRow>): Promise<Verification> {
  let previous: AuditRow | undefined;
  let first: AuditRow | undefined;
  let count = 0;
  for await (const row of rows) {
    if (rowHash(row) !== row.hash) return { ok: false, rows: count, broken: row, reason: `row ${row.id} (${row.time}) was changed: its hash does not match its contents` };
    if (previous !== undefined && (row.prev_hash !== previous.hash || row.id !== previous.id + 1)) {
      return { ok: false, rows: count, broken: row, reason: `the chain breaks before row ${row.id} (${row.time}): ${previous.id + 1 === row.id ? `row ${previous.id}, the one it follows, was changed` : `rows ${previous.id + 1}–${row.id - 1} are missing`}` };
    }
    first ??= row;
    previous = row;
    count++;
  }
  return { ok: true, rows: count, first, last: previous };
}

/** A line as xapi writes it to audit.log (`[time|audit|host|client] ('trackid' 'sid' 'name' …)`), which /audit_log serves. */
export function auditLine(row: AuditRow): string {
  const quote = (text: string) => `'${text.replace(/[\\'"]/g, (c) => `\\${c}`).replace(/[\r\n]/g, " ")}'`;
  const args = (JSON.parse(row.args) as AuditArg[]).map((arg) => `(${arg.map(quote).join(" ")})`).join(" ");
  const time = row.time.replaceAll("-", "");
  // One line whatever a field holds: a line break anywhere would forge the next row of the log.
  return `[${time}|audit|${row.host}|${row.client}] (${[`trackid=${row.trackid}`, row.subject_sid, row.subject_name, row.decision, row.outcome, row.kind, row.action].map(quote).join(" ")} (${args}))`.replace(/[\r\n]/g, " ");
}

