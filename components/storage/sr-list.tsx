"use client";

import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { cn } from "@/components/ui/cn.ts";
import { ColGroup } from "@/components/ui/col-group.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { TableSkeleton, tableHeadClasses } from "@/components/ui/table-skeleton.tsx";
import type { TSrHost, TSrSummary } from "@/server/api/srs/schema.ts";
import { ActionMenu, type MenuAction } from "./action-menu.tsx";
import { CapacityBar } from "./capacity-bar.tsx";
import { CreateSrButton } from "./create-sr-dialog.tsx";
import { HealthWithReason } from "./sr-health.tsx";
import { useSrActions } from "./use-sr-actions.tsx";
import { IntentLink } from "@/components/ui/intent-link.tsx";

/** The list follows the toolstack while the page is visible (React Query pauses it in a hidden tab). */
export const SR_LIST_REFETCH_MS = 5000;

export const srHref = (sr: Pick<TSrSummary, "uuid">) => `/storage/${sr.uuid}`;

const linkClasses =
  "rounded font-medium text-zinc-950 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-white dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

/** The SRs the toolstack knows: a table on wide screens, one card per SR on narrow ones. */
export function SrList() {
  const trpc = useTRPC();
  const list = useQuery(trpc.srs.list.queryOptions(undefined, { refetchInterval: SR_LIST_REFETCH_MS }));
  const actions = useSrActions();

  const srs = list.data?.srs;
  return (
    <section aria-labelledby="sr-list-heading" className="flex flex-col gap-4">
      <div className="flex flex-wrap items-center justify-between gap-3">
        <div>
          <h2 id="sr-list-heading" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
            Storage repositories
          </h2>
          {srs === undefined ? (
            <Skeleton className="my-0.5 h-4 w-44" />
          ) : (
            <p className="text-sm text-zinc-600 dark:text-zinc-400">{srs.length === 0 ? "None yet." : `${plural(srs.length, "SR")} known to the toolstack.`}</p>
          )}
        </div>
        <CreateSrButton />
      </div>
      {/* With data on screen the error says its state may be stale: the list keeps working with the last answer. */}
      {list.isError ? (
        <QueryError error={list.error} what={srs === undefined ? "the SRs" : "the latest state of the SRs"} onRetry={() => void list.refetch()} />
      ) : null}
      {actions.element}
      {srs === undefined ? (
        list.isError ? null : <SrListSkeleton />
      ) : srs.length === 0 ? (
        <Panel title="No SRs" description="The toolstack knows no storage repository. Create one to store volumes." />
      ) : (
        <>
          <SrTable srs={srs} actionsFor={actions.actionsFor} />
          <ul aria-label="Storage repositories" className="flex flex-col gap-3 lg:hidden">
            {srs.map((sr) => (
              <li key={sr.ref}>
                <SrCard sr={sr} actions={<ActionMenu label={`Actions for ${sr.name}`} actions={actions.actionsFor(sr)} />} />
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function SrName({ sr }: { sr: TSrSummary }) {
  return (
    <div className="flex min-w-0 flex-col gap-1">
      <div className="flex flex-wrap items-center gap-2">
        <IntentLink href={srHref(sr)} className={linkClasses}>
          {sr.name || "(no name)"}
        </IntentLink>
        {sr.isDefault ? <Badge tone="info">Default</Badge> : null}
        {!sr.attached ? <Badge tone="neutral">Detached</Badge> : null}
      </div>
      {sr.description ? <p className="line-clamp-1 text-xs text-zinc-600 dark:text-zinc-400" title={sr.description}>{sr.description}</p> : null}
    </div>
  );
}

/** The host an SR is on: its name, its address, and Offline in words when its heartbeat stopped. */
export function SrHostLabel({ host, className }: { host: TSrHost | null; className?: string }) {
  if (host === null) return <span className={cn("text-zinc-500 dark:text-zinc-400", className)}>No host</span>;
  return (
    <span className={cn("flex min-w-0 flex-col items-start gap-0.5", className)}>
      {host.name !== "" && host.name !== host.address ? <span className="max-w-full truncate text-zinc-800 dark:text-zinc-200" title={host.name}>{host.name}</span> : null}
      <span className="font-mono text-xs break-all text-zinc-600 dark:text-zinc-400">{host.address}</span>
      {!host.live ? (
        <Badge tone="danger">
          <span aria-hidden="true" className="mr-1 size-1.5 rounded-full bg-current" />
          Host offline
        </Badge>
      ) : null}
    </span>
  );
}

function SrTable({ srs, actionsFor }: { srs: TSrSummary[]; actionsFor: (sr: TSrSummary) => MenuAction[] }) {
  return (
    <div className="hidden rounded-xl border border-zinc-200 bg-white shadow-xs lg:block dark:border-zinc-800 dark:bg-zinc-900/60">
      <table className="w-full table-fixed text-sm">
        <caption className="sr-only">Storage repositories</caption>
        <ColGroup widths={columnWidths} />
        <thead className="border-b border-zinc-200 dark:border-zinc-800">
          <tr>
            <th scope="col" className={tableHeadClasses}>Name</th>
            <th scope="col" className={tableHeadClasses}>Type</th>
            <th scope="col" className={`${tableHeadClasses} hidden xl:table-cell`}>Host</th>
            <th scope="col" className={tableHeadClasses}>Health</th>
            <th scope="col" className={tableHeadClasses}>Space</th>
            <th scope="col" className={`${tableHeadClasses} text-right`}>Volumes</th>
            <th scope="col" className={`${tableHeadClasses} text-right`}><span className="sr-only">Actions</span></th>
          </tr>
        </thead>
        <tbody className="divide-y divide-zinc-200 dark:divide-zinc-800">
          {srs.map((sr) => (
            <tr key={sr.ref} className="align-top">
              <th scope="row" className="px-4 py-3 text-left font-normal">
                <SrName sr={sr} />
                {/* Below xl the host column would squeeze the names: the host goes under the name instead. */}
                <p className="mt-1 text-xs text-zinc-600 xl:hidden dark:text-zinc-400">
                  On host <span className="font-mono">{sr.host?.address ?? "none"}</span>
                  {sr.host?.live === false ? <span className="font-medium text-red-700 dark:text-red-400"> (offline)</span> : null}
                </p>
              </th>
              <td className="px-4 py-3">
                <Badge mono>{sr.type}</Badge>
              </td>
              <td className="hidden px-4 py-3 xl:table-cell">
                <SrHostLabel host={sr.host} />
              </td>
              <td className="px-4 py-3">
                <HealthWithReason health={sr.health} clamp />
              </td>
              <td className="px-4 py-3">
                <CapacityBar used={sr.physicalUtilisation} total={sr.physicalSize} label={`Space used on ${sr.name}`} />
              </td>
              <td className="px-4 py-3 text-right tabular-nums text-zinc-800 dark:text-zinc-200">{sr.volumeCount.toLocaleString("en-US")}</td>
              <td className="px-4 py-2.5 text-right">
                <ActionMenu label={`Actions for ${sr.name}`} actions={actionsFor(sr)} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function SrCard({ sr, actions }: { sr: TSrSummary; actions: ReactNode }) {
  return (
    <article aria-label={sr.name} className="flex flex-col gap-3 rounded-xl border border-zinc-200 bg-white p-4 shadow-xs dark:border-zinc-800 dark:bg-zinc-900/60">
      <div className="flex items-start justify-between gap-3">
        <SrName sr={sr} />
        {actions}
      </div>
      <dl className="grid grid-cols-[auto_1fr] items-start gap-x-4 gap-y-2 text-sm">
        <dt className="text-zinc-500 dark:text-zinc-400">Health</dt>
        <dd className="min-w-0">
          <HealthWithReason health={sr.health} />
        </dd>
        <dt className="text-zinc-500 dark:text-zinc-400">Space</dt>
        <dd className="min-w-0">
          <CapacityBar used={sr.physicalUtilisation} total={sr.physicalSize} label={`Space used on ${sr.name}`} />
        </dd>
        <dt className="text-zinc-500 dark:text-zinc-400">Type</dt>
        <dd>
          <Badge mono>{sr.type}</Badge>
        </dd>
        <dt className="text-zinc-500 dark:text-zinc-400">Host</dt>
        <dd className="min-w-0">
          <SrHostLabel host={sr.host} />
        </dd>
        <dt className="text-zinc-500 dark:text-zinc-400">Volumes</dt>
        <dd className="tabular-nums text-zinc-800 dark:text-zinc-200">{sr.volumeCount.toLocaleString("en-US")}</dd>
      </dl>
    </article>
  );
}

/** The table's column widths, shared with its skeleton so nothing moves when the data arrives. */
const columnWidths = ["", "w-20", "hidden w-[14%] xl:table-column", "w-[22%] xl:w-[20%]", "w-[20%] xl:w-[18%]", "w-20", "w-28"];

/** The list's frame with two placeholder SRs, at the sizes of real rows and cards. */
function SrListSkeleton() {
  return (
    <TableSkeleton
      label="Loading the SRs…"
      columnWidths={columnWidths}
      rows={2}
      cardHeight="h-56"
      columns={[
        { label: "Name", lines: ["h-5 w-40", "h-4 w-28"] },
        { label: "Type", lines: ["h-5 w-10"] },
        { label: "Host", lines: ["h-4 w-20"], className: "hidden xl:table-cell" },
        { label: "Health", lines: ["h-5 w-20"] },
        { label: "Space", lines: ["h-2", "h-4 w-32"] },
        { label: "Volumes", lines: ["ml-auto h-5 w-8"] },
        { label: "", lines: ["ml-auto h-8 w-20"] },
      ]}
    />
  );
}
