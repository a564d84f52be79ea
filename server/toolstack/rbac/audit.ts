// The audit trail: one row per state-changing call or HTTP action, allowed or denied, and per login, failed
// ones too, in the toolstack's database, written before the call answers. Each row carries the hash of the row
// before it (SHA-256 over that hash and the row's own fields), so a row edited or removed breaks the chain and
// `verify` finds where. Arguments are kept as xapi's audit log keeps them (rbac_audit.ml): names and labels by
// value, refs as (name, label, uuid, ref), anything else (passwords, secrets, configurations) left out; a
// session ref never appears.
import { createHash } from "node:crypto";
import { type AuditArg, type AuditRow, type Decision, GENESIS, rowHash, type Verification, verifyChain } from "../../xenapi/audit-log.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { Database, Queryable } from "../db/database.ts";
import type { Session } from "../sessions.ts";

export interface AuditEntry {
  /** The caller's session; for a login, none yet: `user` names who tried. */
  session: Session | null;
  user?: string;
  client: string;
  decision: Decision;
  /** The error code of a call that failed; undefined when it succeeded (or was denied). */
  error?: string;
  kind: "API" | "HTTP";
  action: string;
  args: AuditArg[];
}

/** xapi's tracking id: a hash of the session, never the session ref itself. */
export function trackId(sessionRef: string): string {
  return createHash("sha256").update(`hangar-trackid:${sessionRef}`).digest("hex").slice(0, 32);
}

/** Whether a call is audited: what changes state (not reads, Hangar's own reads included, event waits or progress reports). */
export function audited(action: string): boolean {
  const [cls = "", message = ""] = action.replace(/^Async\./, "").split(".");
  if (message.startsWith("get") || message.startsWith("hangar_get") || cls === "event" || cls === "system") return false;
  return action !== "task.set_progress";
}

export interface AuditQuery {
  since?: string;
  until?: string;
  user?: string;
  action?: string;
  decision?: Decision;
  /** "OK", or "ERROR" for any error. */
  outcome?: "OK" | "ERROR";
  limit?: number;
  /** The newest first (the console's table) rather than the oldest first (the text log). */
  newestFirst?: boolean;
}

export class AuditLog {
  readonly #db: Database;
  readonly #host: string;

  constructor(db: Database, host: string) {
    this.#db = db;
    this.#host = host;
  }

  /** Appends one row to the chain, in a transaction of its own (`tx`: in the caller's, with its change). */
  async record(entry: AuditEntry, tx?: Queryable): Promise<void> {
    const write = async (q: Queryable) => {
      const last = await q.get<{ id: number; hash: string }>("SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1");
      const session = entry.session;
      const row: Omit<AuditRow, "hash"> = {
        id: Number(last?.id ?? 0) + 1,
        time: new Date().toISOString(),
        host: this.#host,
        trackid: session === null ? "" : trackId(session.ref),
        subject_sid: session === null ? "" : session.superuser ? "LOCAL_SUPERUSER" : session.authUserSid,
        subject_name: session?.userName ?? entry.user ?? "",
        client: entry.client,
        decision: entry.decision,
        outcome: entry.decision === "DENIED" ? "" : entry.error === undefined ? "OK" : `ERROR:${entry.error}`,
        kind: entry.kind,
        action: entry.action.replace(/^Async\./, ""),
        args: JSON.stringify(entry.args),
        prev_hash: last?.hash ?? GENESIS,
      };
      await q.run(
        "INSERT INTO audit_log (id, time, host, trackid, subject_sid, subject_name, client, decision, outcome, kind, action, args, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [row.id, row.time, row.host, row.trackid, row.subject_sid, row.subject_name, row.client, row.decision, row.outcome, row.kind, row.action, row.args, row.prev_hash, rowHash(row)],
      );
    };
    await (tx === undefined ? this.#db.transaction(write) : write(tx));
  }

  /** Rows matching `query`, in pages of a few thousand (the caller stops reading when it has enough). */
  async *rows(query: AuditQuery = {}): AsyncGenerator<AuditRow> {
    const where: string[] = [];
    const params: (string | number)[] = [];
    const condition = (clause: string, value?: string) => {
      where.push(clause);
      if (value !== undefined) params.push(value);
    };
    if (query.since !== undefined) condition("time >= ?", query.since);
    if (query.until !== undefined) condition("time < ?", query.until);
    if (query.user !== undefined) condition("subject_name = ?", query.user);
    if (query.action !== undefined) condition("action = ?", query.action);
    if (query.decision !== undefined) condition("decision = ?", query.decision);
    if (query.outcome === "OK") condition("outcome = 'OK'");
    if (query.outcome === "ERROR") condition("outcome LIKE 'ERROR:%'");
    const order = query.newestFirst === true ? "DESC" : "ASC";
    const page = 2000;
    let left = query.limit ?? Number.POSITIVE_INFINITY;
    let after: number | undefined;
    while (left > 0) {
      const cursor = after === undefined ? [] : [order === "ASC" ? "id > ?" : "id < ?"];
      const clauses = [...where, ...cursor];
      const rows = await this.#db.all<AuditRow>(`SELECT * FROM audit_log${clauses.length > 0 ? ` WHERE ${clauses.join(" AND ")}` : ""} ORDER BY id ${order} LIMIT ${Math.min(page, left)}`, [...params, ...(after === undefined ? [] : [after])]);
      for (const row of rows) yield { ...row, id: Number(row.id) };
      if (rows.length < Math.min(page, left)) return;
      left -= rows.length;
      after = Number(rows[rows.length - 1]!.id);
    }
  }

  /** Checks the chain from the oldest row kept (verifyChain). */
  verify(): Promise<Verification> {
    return verifyChain(this.rows());
  }

  /** Removes rows older than `before` (retention); the oldest row kept then starts the chain. Answers how many. */
  prune(before: string): Promise<number> {
    return this.#db.run("DELETE FROM audit_log WHERE time < ?", [before]);
  }
}

/** The error code of a failure, for the outcome column. */
export function errorCode(error: unknown): string {
  return error instanceof XenApiError ? error.code : "INTERNAL_ERROR";
}
