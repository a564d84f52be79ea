"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import type { ReactNode } from "react";
import { plural } from "@/lib/format.ts";
import { CapacityBar } from "@/components/storage/capacity-bar.tsx";
import { HealthWithReason } from "@/components/storage/sr-health.tsx";
import { SR_LIST_REFETCH_MS, srHref } from "@/components/storage/sr-list.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { cn } from "@/components/ui/cn.ts";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { TSrSummary } from "@/server/api/srs/schema.ts";

/** SRs shown by their space on the dashboard: the fullest first; the storage page has the rest. */
const FULLEST_SHOWN = 4;

const linkClasses =
  "rounded text-sm font-medium text-zinc-900 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100 dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

/**
 * The dashboard's storage part: SR counts by health, every SR that is not Healthy with its reason, and space.
 * The frames are drawn at once and only their figures wait for the data, so nothing moves when it arrives.
 */
export function StorageSummary() {
  const trpc = useTRPC();
  const list = useQuery(trpc.srs.list.queryOptions(undefined, { refetchInterval: SR_LIST_REFETCH_MS }));
  const srs = list.data?.srs;
  const count = (test: (sr: TSrSummary) => boolean) => srs?.filter(test).length;
  const attention = srs?.filter((sr) => sr.health.tag !== "Healthy") ?? [];

  return (
    <div className="flex flex-col gap-4">
      {list.isError ? <QueryError error={list.error} what="the SRs" onRetry={() => void list.refetch()} /> : null}
      {srs === undefined && !list.isError ? (
        <p role="status" className="sr-only">
          Loading the SRs…
        </p>
      ) : null}
      <div className="grid gap-2 sm:grid-cols-3 sm:gap-4">
        <HealthCount label="Healthy" value={count((sr) => sr.health.tag === "Healthy")} tone="success" note="Fully available." />
        <HealthCount label="Recovering" value={count((sr) => sr.health.tag === "Recovering")} tone="warning" note="Busy, e.g. rebuilding; usable." />
        <HealthCount
          label="Unreachable"
          value={count((sr) => sr.health.tag !== "Healthy" && sr.health.tag !== "Recovering")}
          tone="danger"
          note="Detached, failing or unavailable."
        />
      </div>
      {srs === undefined ? (
        list.isError ? null : <Skeleton className="h-5 w-48" />
      ) : srs.length === 0 ? (
        <Panel
          level={3}
          title="No SRs yet"
          description="The toolstack knows no storage repository."
          actions={
            <Link href="/storage" className={linkClasses}>
              Create an SR
            </Link>
          }
        />
      ) : attention.length === 0 ? (
        <p className="text-sm text-zinc-600 dark:text-zinc-400">{srs.length === 1 ? "The only SR is Healthy." : `All ${srs.length} SRs are Healthy.`}</p>
      ) : (
        <Panel level={3} tone="warning" title="Needs attention" description={`${plural(attention.length, "SR")} not Healthy, and why.`}>
          <ul className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800">
            {attention.map((sr) => (
              <li key={sr.ref} className="flex flex-col gap-1.5 py-2.5 first:pt-0 last:pb-0 sm:flex-row sm:items-start sm:gap-4">
                <Link href={srHref(sr)} className={cn(linkClasses, "sm:w-48 sm:shrink-0")}>
                  {sr.name || sr.uuid}
                </Link>
                <HealthWithReason health={sr.health} />
              </li>
            ))}
          </ul>
        </Panel>
      )}
      <Capacity srs={srs} />
    </div>
  );
}

function HealthCount({ label, value, tone, note }: { label: string; value: number | undefined; tone: "success" | "warning" | "danger"; note: string }) {
  const mark = { success: "bg-emerald-500", warning: "bg-amber-500", danger: "bg-red-500" }[tone];
  return (
    <section aria-label={`${label} SRs`} className="flex min-w-0 items-center justify-between gap-1 rounded-xl border border-zinc-200 bg-white px-4 py-2 shadow-xs sm:flex-col sm:items-start sm:justify-start sm:p-4 dark:border-zinc-800 dark:bg-zinc-900/60">
      <h3 className="flex min-w-0 items-center gap-1.5 text-sm font-medium text-zinc-600 sm:gap-2 dark:text-zinc-400">
        <span aria-hidden="true" className={cn("size-2 shrink-0 rounded-full", mark)} />
        <span className="truncate">{label}</span>
      </h3>
      {value === undefined ? (
        <Skeleton className="my-1 h-7 w-10" />
      ) : (
        <p className="text-2xl leading-9 font-semibold tracking-tight text-zinc-950 tabular-nums sm:text-3xl dark:text-white">
          {value}
        </p>
      )}
      <p className="hidden text-xs text-zinc-500 sm:block dark:text-zinc-400">{note}</p>
    </section>
  );
}

function Capacity({ srs }: { srs: TSrSummary[] | undefined }) {
  const measured = srs?.filter((sr) => sr.attached && sr.physicalSize > 0) ?? [];
  const used = measured.reduce((sum, sr) => sum + sr.physicalUtilisation, 0);
  const total = measured.reduce((sum, sr) => sum + sr.physicalSize, 0);
  const fullest = [...measured].sort((a, b) => b.physicalUtilisation / b.physicalSize - a.physicalUtilisation / a.physicalSize).slice(0, FULLEST_SHOWN);
  const detached = srs?.filter((sr) => !sr.attached).length ?? 0;
  let body: ReactNode;
  if (srs === undefined) {
    body = (
      // The usual final shape: the total, then two SRs side by side.
      <div className="flex flex-col gap-4">
        <div className="flex flex-col gap-1.5">
          <Skeleton className="h-3" />
          <Skeleton className="h-5 w-40" />
        </div>
        <div className="grid gap-3 sm:grid-cols-2">
          <Skeleton className="h-[3.25rem]" />
          <Skeleton className="h-[3.25rem] max-sm:hidden" />
        </div>
      </div>
    );
  } else if (measured.length === 0) {
    body = <p className="text-sm text-zinc-600 dark:text-zinc-400">No attached SR reports its space.</p>;
  } else {
    body = (
      <div className="flex flex-col gap-4">
        <CapacityBar used={used} total={total} label="Space used across attached SRs" size="lg" />
        {measured.length > 1 ? (
          <ul aria-label="Fullest SRs" className="grid gap-3 sm:grid-cols-2">
            {fullest.map((sr) => (
              <li key={sr.ref} className="flex min-w-0 flex-col gap-1">
                <div className="flex min-w-0 items-center gap-2">
                  <Link href={srHref(sr)} className={cn(linkClasses, "truncate")}>
                    {sr.name || sr.uuid}
                  </Link>
                  {sr.isDefault ? <Badge tone="info">Default</Badge> : null}
                </div>
                <CapacityBar used={sr.physicalUtilisation} total={sr.physicalSize} label={`Space used on ${sr.name}`} />
              </li>
            ))}
          </ul>
        ) : null}
      </div>
    );
  }
  return (
    <Panel
      level={3}
      title="Capacity"
      description={
        srs === undefined
          ? "Space used across the attached SRs."
          : `Across ${plural(measured.length, "attached SR")}${detached > 0 ? `; ${detached} detached not counted` : ""}.`
      }
      actions={
        <Link href="/storage" className={linkClasses}>
          All SRs
        </Link>
      }
    >
      {body}
    </Panel>
  );
}
