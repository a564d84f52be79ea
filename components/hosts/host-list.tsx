"use client";

import { useQuery } from "@tanstack/react-query";
import { plural } from "@/lib/format.ts";
import { srHref } from "@/components/storage/sr-list.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { ColGroup } from "@/components/ui/col-group.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { TableSkeleton, tableHeadClasses } from "@/components/ui/table-skeleton.tsx";
import type { THostSr, THostSummary } from "@/server/api/hosts/schema.ts";
import { hostNote, hostTitle, LiveBadge, RoleBadge } from "./host-status.tsx";
import { IntentLink } from "@/components/ui/intent-link.tsx";

/** Hosts follow the pool while the page is visible: a heartbeat that stops shows within one refresh. */
export const HOST_LIST_REFETCH_MS = 5000;

const linkClasses =
  "rounded font-medium text-zinc-950 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-white dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

/** The pool's hosts: a table on wide screens, one card per host on narrow ones. */
export function HostList() {
  const trpc = useTRPC();
  const list = useQuery(trpc.hosts.list.queryOptions(undefined, { refetchInterval: HOST_LIST_REFETCH_MS }));
  const hosts = list.data?.hosts;
  const offline = hosts?.filter((host) => !host.live).length ?? 0;

  return (
    <section aria-labelledby="host-list-heading" className="flex flex-col gap-4">
      <div>
        <h2 id="host-list-heading" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
          Hosts of the pool
        </h2>
        {hosts === undefined ? (
          <Skeleton className="my-0.5 h-4 w-44" />
        ) : (
          <p className="text-sm text-zinc-600 dark:text-zinc-400">
            {plural(hosts.length, "host")}
            {offline > 0 ? `, ${offline} offline` : hosts.length > 1 ? ", all live" : ""}.
          </p>
        )}
      </div>
      {list.isError ? (
        <QueryError error={list.error} what={hosts === undefined ? "the hosts" : "the latest state of the hosts"} onRetry={() => void list.refetch()} />
      ) : null}
      {hosts === undefined ? (
        list.isError ? null : <HostListSkeleton />
      ) : hosts.length === 0 ? (
        <Panel title="No hosts" description="The toolstack knows no host: it may be another toolstack, or an older Hangar." />
      ) : (
        <>
          <HostTable hosts={hosts} />
          <ul aria-label="Hosts" className="flex flex-col gap-3 lg:hidden">
            {hosts.map((host) => (
              <li key={host.ref}>
                <HostCard host={host} />
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function HostName({ host }: { host: THostSummary }) {
  return (
    <div className="flex min-w-0 flex-col gap-1">
      <span className="font-medium break-words text-zinc-950 dark:text-white">{host.name || host.address}</span>
      {host.description ? <span className="line-clamp-1 text-xs text-zinc-600 dark:text-zinc-400">{host.description}</span> : null}
      {host.version ? <span className="text-xs text-zinc-500 dark:text-zinc-400">{host.version}</span> : null}
    </div>
  );
}

function HostState({ host }: { host: THostSummary }) {
  const note = hostNote(host);
  return (
    <div className="flex min-w-0 flex-col items-start gap-1">
      <div className="flex flex-wrap gap-1.5">
        <LiveBadge live={host.live} />
        {!host.enabled ? <Badge tone="warning">Disabled</Badge> : null}
      </div>
      {note ? <p className="text-xs break-words text-zinc-600 dark:text-zinc-400">{note}</p> : null}
    </div>
  );
}

function HostRole({ host }: { host: THostSummary }) {
  return (
    <div className="flex min-w-0 flex-col items-start gap-1">
      <RoleBadge isMaster={host.isMaster} />
      {host.isConsoleHost ? <span className="text-xs text-zinc-600 dark:text-zinc-400">The console connects here</span> : null}
    </div>
  );
}

function HostSrs({ host }: { host: THostSummary }) {
  if (host.srs.length === 0) return <span className="text-sm text-zinc-500 dark:text-zinc-400">None</span>;
  return (
    <ul aria-label={`SRs of ${hostTitle(host)}`} className="flex min-w-0 flex-col gap-1.5">
      {host.srs.map((sr) => (
        <HostSrItem key={sr.ref} sr={sr} />
      ))}
    </ul>
  );
}

function HostSrItem({ sr }: { sr: THostSr }) {
  return (
    <li className="flex min-w-0 flex-wrap items-center gap-x-2 gap-y-1">
      <IntentLink href={srHref(sr)} className={`${linkClasses} text-sm break-words`}>
        {sr.name || sr.uuid}
      </IntentLink>
      <Badge mono>{sr.type}</Badge>
      {sr.isDefault ? <Badge tone="info">Default</Badge> : null}
      {!sr.attached ? <Badge>Detached</Badge> : null}
    </li>
  );
}

function HostTable({ hosts }: { hosts: THostSummary[] }) {
  return (
    <div className="hidden rounded-xl border border-zinc-200 bg-white shadow-xs lg:block dark:border-zinc-800 dark:bg-zinc-900/60">
      <table className="w-full table-fixed text-sm">
        <caption className="sr-only">Hosts of the pool</caption>
        <ColGroup widths={columnWidths} />
        <thead className="border-b border-zinc-200 dark:border-zinc-800">
          <tr>
            <th scope="col" className={tableHeadClasses}>Host</th>
            <th scope="col" className={tableHeadClasses}>Address</th>
            <th scope="col" className={tableHeadClasses}>State</th>
            <th scope="col" className={tableHeadClasses}>Role</th>
            <th scope="col" className={tableHeadClasses}>SRs</th>
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-200 dark:divide-zinc-800">
          {hosts.map((host) => (
            <tr key={host.ref} aria-label={hostTitle(host)} className="align-top">
              <th scope="row" className="px-4 py-3 text-left font-normal">
                <HostName host={host} />
              </th>
              <td className="px-4 py-3 font-mono text-xs break-all text-zinc-800 dark:text-zinc-200">{host.address}</td>
              <td className="px-4 py-3">
                <HostState host={host} />
              </td>
              <td className="px-4 py-3">
                <HostRole host={host} />
              </td>
              <td className="px-4 py-3">
                <HostSrs host={host} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function HostCard({ host }: { host: THostSummary }) {
  const dt = "text-zinc-500 dark:text-zinc-400";
  return (
    <article aria-label={hostTitle(host)} className="flex flex-col gap-3 rounded-xl border border-zinc-200 bg-white p-4 shadow-xs dark:border-zinc-800 dark:bg-zinc-900/60">
      <HostName host={host} />
      <dl className="grid grid-cols-[auto_minmax(0,1fr)] items-start gap-x-4 gap-y-2 text-sm">
        <dt className={dt}>State</dt>
        <dd className="min-w-0">
          <HostState host={host} />
        </dd>
        <dt className={dt}>Role</dt>
        <dd className="min-w-0">
          <HostRole host={host} />
        </dd>
        <dt className={dt}>Address</dt>
        <dd className="font-mono text-xs leading-5 break-all text-zinc-800 dark:text-zinc-200">{host.address}</dd>
        <dt className={dt}>SRs</dt>
        <dd className="min-w-0">
          <HostSrs host={host} />
        </dd>
      </dl>
    </article>
  );
}

/** The table's column widths, shared with its skeleton so nothing moves when the data arrives. */
const columnWidths = ["w-[20%]", "w-[13%]", "w-[22%]", "w-[17%]", ""];

/** The list's frame with one placeholder host, at the sizes of a real row and card. */
function HostListSkeleton() {
  return (
    <TableSkeleton
      label="Loading the hosts…"
      columnWidths={columnWidths}
      rows={1}
      cardHeight="h-48"
      columns={[
        { label: "Host", lines: ["h-5 w-32", "h-4 w-20"] },
        { label: "Address", lines: ["h-4 w-20"] },
        { label: "State", lines: ["h-5 w-12"] },
        { label: "Role", lines: ["h-5 w-14", "h-4 w-28"] },
        { label: "SRs", lines: ["h-5 w-40"] },
      ]}
    />
  );
}
