"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, type ReactNode } from "react";
import { plural } from "@/lib/format.ts";
import { SrCharts } from "@/components/datasources/sr-charts.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button, buttonClasses } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { VolumeTable } from "@/components/volumes/volume-table.tsx";
import type { TGetSrResponse } from "@/server/api/srs/schema.ts";
import type { MenuAction } from "./action-menu.tsx";
import { CapacityBar } from "./capacity-bar.tsx";
import { HealthBadge } from "./sr-health.tsx";
import { SR_LIST_REFETCH_MS } from "./sr-list.tsx";
import { useSrActions } from "./use-sr-actions.tsx";

/**
 * One SR's page: its header (health and why, space, default marker, uuid, actions) kept current every 5 s,
 * then its datasource charts and its volumes. A detached SR says so and offers Attach.
 */
export function SrDetail({ sr, initial }: { sr: string; initial: TGetSrResponse | undefined }) {
  const trpc = useTRPC();
  const router = useRouter();
  const query = useQuery(trpc.srs.get.queryOptions({ sr }, { initialData: initial, refetchInterval: SR_LIST_REFETCH_MS }));
  const actions = useSrActions({ onGone: () => router.push("/storage") });

  const back = (
    <nav aria-label="Breadcrumb" className="text-sm">
      <Link href="/storage" className="rounded text-zinc-600 hover:text-zinc-950 hover:underline focus-visible:outline-2 focus-visible:outline-sky-600 dark:text-zinc-400 dark:hover:text-white">
        Storage
      </Link>
      <span aria-hidden="true" className="mx-1.5 text-zinc-400">/</span>
    </nav>
  );

  if (query.data === undefined) {
    if (query.error?.data?.code === "NOT_FOUND") return <Gone back={back} />;
    return (
      <>
        {back}
        {query.isError ? <QueryError error={query.error} what="this SR" onRetry={() => void query.refetch()} /> : <SrHeaderSkeleton />}
      </>
    );
  }
  // Removed in another window while this page was open.
  if (query.error?.data?.code === "NOT_FOUND") return <Gone back={back} />;

  const data = query.data;
  return (
    <>
      <SrHeader sr={data} back={back} actions={actions.actionsFor(data)} />
      {actions.element}
      {query.isError ? <QueryError error={query.error} what="the latest state of this SR" onRetry={() => void query.refetch()} /> : null}
      {!data.attached ? (
        <Alert tone="warning" title="This SR is detached">
          <div className="flex flex-wrap items-center justify-between gap-3">
            <span>
              Its volumes cannot be listed, used or copied, and its space is not measured, until it is attached again.
              {data.hasPbd ? "" : " It has no connection to this host, so it cannot be attached from here."}
            </span>
            {data.hasPbd ? <AttachButton actions={actions.actionsFor(data)} /> : null}
          </div>
        </Alert>
      ) : null}
      {data.attached ? (
        <>
          <SrCharts srRef={data.ref} />
          <VolumeTable srRef={data.ref} />
        </>
      ) : (
        <Panel title="Performance and volumes" description="Its plugin serves neither datasources nor volumes while the SR is detached. Attach it to see them." />
      )}
    </>
  );
}

function Gone({ back }: { back: ReactNode }) {
  return (
    <>
      {back}
      <Panel
        tone="warning"
        title="This SR no longer exists"
        description="It was forgotten or destroyed, perhaps in another window."
        actions={
          <Link href="/storage" className={buttonClasses({ variant: "secondary", size: "sm" })}>
            Back to the SR list
          </Link>
        }
      />
    </>
  );
}

function AttachButton({ actions }: { actions: MenuAction[] }) {
  const attach = actions.find((a) => a.key === "attach");
  if (attach === undefined) return null;
  return (
    <Button size="sm" onClick={attach.onSelect} disabled={attach.disabled} deniedReason={attach.denied}>
      <span>{attach.label}</span>
    </Button>
  );
}

function SrHeader({ sr, back, actions }: { sr: TGetSrResponse; back: ReactNode; actions: MenuAction[] }) {
  return (
    <div className="flex flex-col gap-5 border-b border-zinc-200 pb-6 dark:border-zinc-800">
      <div className="flex flex-col gap-2">
        {back}
        <div className="flex flex-col gap-4 lg:flex-row lg:items-start lg:justify-between">
          <div className="flex min-w-0 flex-col gap-1.5">
            <div className="flex flex-wrap items-center gap-2">
              <h1 className="text-2xl font-semibold tracking-tight break-words text-zinc-950 dark:text-white">{sr.name || "(no name)"}</h1>
              {sr.isDefault ? <Badge tone="info">Default</Badge> : null}
              <Badge mono>{sr.type}</Badge>
              {!sr.attached ? <Badge>Detached</Badge> : null}
            </div>
            {sr.description ? <p className="max-w-2xl text-sm text-zinc-600 dark:text-zinc-400">{sr.description}</p> : null}
          </div>
          <div role="group" aria-label={`Actions for ${sr.name}`} className="flex flex-wrap gap-2 lg:justify-end">
            {actions
              .filter((action) => action.key !== "attach" || sr.attached)
              .map((action) => (
                <ActionButton key={action.key} action={action} />
              ))}
          </div>
        </div>
      </div>
      <dl className="grid gap-4 sm:grid-cols-2 lg:grid-cols-[minmax(0,1.2fr)_minmax(0,1fr)_minmax(0,1fr)]">
        <div className="flex min-w-0 flex-col gap-1.5">
          <dt className="text-xs font-medium tracking-wide text-zinc-500 uppercase dark:text-zinc-400">
            Health
          </dt>
          <dd className="flex min-w-0 flex-col items-start gap-1">
            <HealthBadge health={sr.health} />
            <span className="text-sm break-words text-zinc-700 dark:text-zinc-300">
              {sr.health.reason || (sr.health.tag === "Healthy" ? "Fully available." : "No reason given.")}
            </span>
          </dd>
        </div>
        <div className="flex min-w-0 flex-col gap-1.5">
          <dt className="text-xs font-medium tracking-wide text-zinc-500 uppercase dark:text-zinc-400">Space</dt>
          <dd>
            <CapacityBar used={sr.physicalUtilisation} total={sr.physicalSize} label={`Space used on ${sr.name}`} size="lg" />
          </dd>
        </div>
        <div className="flex min-w-0 flex-col gap-1.5 sm:col-span-2 lg:col-span-1">
          <dt className="text-xs font-medium tracking-wide text-zinc-500 uppercase dark:text-zinc-400">Identity</dt>
          <dd className="flex min-w-0 flex-col gap-0.5 text-sm text-zinc-700 dark:text-zinc-300">
            <span className="tabular-nums">{plural(sr.volumeCount, "volume")}</span>
            <span className="font-mono text-xs break-all" title="uuid">
              <span className="sr-only">uuid </span>
              {sr.uuid}
            </span>
            {sr.uri ? <span className="font-mono text-xs break-all text-zinc-500 dark:text-zinc-400">{sr.uri}</span> : null}
            {sr.host ? (
              <span>
                On host{" "}
                <Link href="/hosts" className="rounded underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-sky-600 dark:decoration-zinc-600 dark:hover:decoration-zinc-100">
                  {sr.host.name && sr.host.name !== sr.host.address ? `${sr.host.name} (${sr.host.address})` : sr.host.address}
                </Link>
                {sr.host.live ? null : <span className="font-medium text-red-700 dark:text-red-400">, offline</span>}
              </span>
            ) : null}
          </dd>
        </div>
      </dl>
    </div>
  );
}

function ActionButton({ action }: { action: MenuAction }) {
  const hintId = useId();
  return (
    <>
      <Button
        size="sm"
        variant="secondary"
        disabled={action.disabled}
        deniedReason={action.denied}
        title={action.hint}
        aria-describedby={action.hint ? hintId : undefined}
        onClick={action.onSelect}
        className={cn(action.tone === "danger" && "text-red-700! dark:text-red-400!")}
      >
        {/* One flex child: the sr-only part of the label must not get the button's gap around it. */}
        <span>{action.label}</span>
      </Button>
      {action.hint ? (
        <span id={hintId} hidden>
          {action.hint}
        </span>
      ) : null}
    </>
  );
}

function SrHeaderSkeleton() {
  return (
    <SkeletonGroup label="Loading the SR…" className="flex flex-col gap-5 border-b border-zinc-200 pb-6 dark:border-zinc-800">
      <Skeleton className="h-8 w-64" />
      <div className="grid gap-4 sm:grid-cols-2 lg:grid-cols-3">
        <Skeleton className="h-16" />
        <Skeleton className="h-16" />
        <Skeleton className="h-16" />
      </div>
    </SkeletonGroup>
  );
}
