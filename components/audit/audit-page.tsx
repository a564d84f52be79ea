"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import type { TAuditEntry } from "@/server/api/audit/schema.ts";

type Outcome = "" | "OK" | "ERROR" | "DENIED";

/** A datetime-local value (the browser's time) as an ISO time, or undefined when empty. */
function isoOf(local: string): string | undefined {
  if (local === "") return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

function OutcomeBadge({ entry }: { entry: TAuditEntry }) {
  if (entry.decision === "DENIED") return <Badge tone="danger">Denied</Badge>;
  if (entry.outcome === "OK") return <Badge tone="success">OK</Badge>;
  return <Badge tone="warning">{entry.outcome.replace(/^ERROR:/, "Error: ")}</Badge>;
}

/** Whether the trail's hash chain holds: every row as written, none removed. */
function ChainStatus() {
  const trpc = useTRPC();
  const chain = useQuery(trpc.audit.verify.queryOptions(undefined, { refetchInterval: 60_000 }));
  if (chain.data === undefined) return chain.isError ? <QueryError error={chain.error} what="the audit chain" /> : <p className="text-sm text-zinc-600 dark:text-zinc-400">Checking the chain…</p>;
  const { ok, rows, first, last, head, reason } = chain.data;
  return ok ? (
    <Alert tone="info" title="The audit trail verifies">
      {rows === 0 ? "No rows yet." : `${rows.toLocaleString()} rows from ${new Date(first!).toLocaleString()} to ${new Date(last!).toLocaleString()}, each as written and none removed. Head hash: `}
      {head !== null ? <span className="font-mono text-xs break-all">{head}</span> : null}
    </Alert>
  ) : (
    <Alert tone="error" title="The audit trail does not verify">
      {reason}. Rows may have been changed or removed in the database.
    </Alert>
  );
}

/** The trail, newest first, with filters. */
export function AuditPage() {
  const trpc = useTRPC();
  const reading = useVerdict("audit.read");
  const [user, setUser] = useState("");
  const [action, setAction] = useState("");
  const [outcome, setOutcome] = useState<Outcome>("");
  const [since, setSince] = useState("");
  const [until, setUntil] = useState("");
  const filter = { user: user.trim() || undefined, action: action.trim() || undefined, outcome: outcome || undefined, since: isoOf(since), until: isoOf(until), limit: 500 };
  const list = useQuery(trpc.audit.list.queryOptions(filter, { refetchInterval: 10_000, placeholderData: (previous) => previous, enabled: reading.allowed }));
  if (!reading.allowed) return <Alert tone="info">{reading.reason}</Alert>;
  return (
    <>
      <ChainStatus />
      <Panel title="Filters">
        <form role="search" aria-label="Filter the audit trail" className="mt-3 grid gap-3 sm:grid-cols-2 lg:grid-cols-5" onSubmit={(event) => event.preventDefault()}>
          <Field label="User">{(id) => <input id={id} className={inputClasses} value={user} onChange={(e) => setUser(e.target.value)} autoComplete="off" />}</Field>
          <Field label="Action" hint="e.g. VM.destroy, http/get_export">
            {(id, describedBy) => <input id={id} aria-describedby={describedBy} className={inputClasses} value={action} onChange={(e) => setAction(e.target.value)} autoComplete="off" />}
          </Field>
          <Field label="Outcome">
            {(id) => (
              <select id={id} className={selectClasses} value={outcome} onChange={(e) => setOutcome(e.target.value as Outcome)}>
                <option value="">Any</option>
                <option value="OK">OK</option>
                <option value="ERROR">Failed</option>
                <option value="DENIED">Denied</option>
              </select>
            )}
          </Field>
          <Field label="From">{(id) => <input id={id} type="datetime-local" className={inputClasses} value={since} onChange={(e) => setSince(e.target.value)} />}</Field>
          <Field label="Until">{(id) => <input id={id} type="datetime-local" className={inputClasses} value={until} onChange={(e) => setUntil(e.target.value)} />}</Field>
        </form>
      </Panel>
      {list.isError ? <QueryError error={list.error} what="the audit trail" onRetry={() => void list.refetch()} /> : null}
      <section aria-labelledby="audit-rows" className="flex flex-col gap-2">
        <h2 id="audit-rows" className="text-base font-semibold text-zinc-900 dark:text-zinc-100">
          Entries
        </h2>
        <p className="text-sm text-zinc-600 dark:text-zinc-400" aria-live="polite">
          {list.data === undefined ? "Loading…" : list.data.more ? "The newest 500 shown: narrow the filters to see older ones." : `${list.data.entries.length} shown.`}
        </p>
        <div className="overflow-x-auto rounded-xl border border-zinc-200 dark:border-zinc-800">
          <table className="w-full min-w-[44rem] text-left text-sm">
            <caption className="sr-only">Audit trail, newest first</caption>
            <thead className="border-b border-zinc-200 bg-zinc-50 text-xs text-zinc-500 dark:border-zinc-800 dark:bg-zinc-900 dark:text-zinc-400">
              <tr>
                {["Time", "User", "From", "Action and arguments", "Outcome"].map((head) => (
                  <th key={head} scope="col" className="px-3 py-2 font-medium">
                    {head}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody className="divide-y divide-zinc-100 dark:divide-zinc-800">
              {(list.data?.entries ?? []).map((entry) => (
                <tr key={entry.id} className="align-top">
                  <td className="px-3 py-2 whitespace-nowrap text-zinc-700 tabular-nums dark:text-zinc-300">{new Date(entry.time).toLocaleString()}</td>
                  <td className="px-3 py-2">
                    <div className="text-zinc-900 dark:text-zinc-100">{entry.user || "—"}</div>
                    {/* A directory user's DN; a local user's identifier and root's LOCAL_SUPERUSER say nothing more than the name. */}
                    {entry.subject !== "" && entry.subject !== "LOCAL_SUPERUSER" && entry.subject !== `local:${entry.user}` ? <div className="text-xs break-words text-zinc-500 dark:text-zinc-400">{entry.subject}</div> : null}
                  </td>
                  <td className="px-3 py-2 font-mono text-xs text-zinc-600 dark:text-zinc-400">{entry.client || "—"}</td>
                  {/* The arguments under the action they belong to: a column of their own was squeezed to a few characters a line. */}
                  <td className="min-w-[16rem] px-3 py-2 font-mono text-xs">
                    <div className="text-zinc-900 dark:text-zinc-100">{entry.action}</div>
                    {entry.args.length > 0 ? (
                      <ul aria-label="Arguments" className="mt-1 flex flex-col gap-0.5 break-words text-zinc-600 dark:text-zinc-400">
                        {entry.args.map((arg, i) => (
                          <li key={i}>{arg}</li>
                        ))}
                      </ul>
                    ) : null}
                  </td>
                  <td className="px-3 py-2">
                    <OutcomeBadge entry={entry} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>
    </>
  );
}
