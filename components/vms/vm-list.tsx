"use client";

import { useQuery } from "@tanstack/react-query";
import { useDeferredValue, useEffect, useMemo, useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { cn } from "@/components/ui/cn.ts";
import { inputClasses } from "@/components/ui/field.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { VmRows } from "./vm-rows.tsx";

const vmCount = (n: number) => `${n.toLocaleString("en")} VM${n === 1 ? "" : "s"}`;

/**
 * The VMs page body: every VM the toolstack knows (a few thousand stay smooth), filtered by name, refreshed every
 * 5 s while the page is visible. The drives' volumes come apart and after it (each SR holding one is listed):
 * read every 30 s, and at once when a VM shows a drive whose volume has not been read.
 */
export function VmList() {
  const trpc = useTRPC();
  const list = useQuery(trpc.vms.list.queryOptions(undefined, { refetchInterval: 5000 }));
  // Asked once the list is in: both read every VM and VBD, and the volumes' SR listings would compete with the
  // list for the toolstack's cores.
  const volumes = useQuery(trpc.vms.volumes.queryOptions(undefined, { refetchInterval: 30_000, enabled: list.data !== undefined }));
  const [filter, setFilter] = useState("");
  const needle = useDeferredValue(filter).trim().toLowerCase();
  const vms = list.data?.vms;
  const shown = useMemo(() => (needle === "" ? (vms ?? []) : (vms ?? []).filter((vm) => vm.name.toLowerCase().includes(needle))), [vms, needle]);
  const known = volumes.data?.volumes;
  const { refetch: refetchVolumes, isFetching: readingVolumes } = volumes;
  useEffect(() => {
    if (known === undefined || readingVolumes) return;
    if (vms?.some((vm) => vm.disks.some((disk) => disk.vdiRef !== null && !(disk.vdiRef in known)))) void refetchVolumes();
    // Only when the list changes (React Query keeps an unchanged list the same object): a volume that cannot be
    // read is asked for again with the next change or in 30 s, not in a loop.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [vms]);

  if (vms === undefined) {
    return list.isError ? <QueryError error={list.error} what="the VMs" onRetry={() => void list.refetch()} /> : <VmListSkeleton />;
  }
  return (
    <section aria-labelledby="vm-list-heading" className="flex flex-col gap-3">
      <h2 id="vm-list-heading" className="sr-only">
        Virtual machines
      </h2>
      {list.isError ? <QueryError error={list.error} what="the latest VM list" onRetry={() => void list.refetch()} /> : null}
      {vms.length === 0 ? (
        <Panel
          title="No VMs yet"
          description="Drop an .xva, an .ova or a disk image above to import a VM. A VM created through XenAPI appears here within 5 seconds."
        />
      ) : (
        <>
          <div className="flex flex-wrap items-center justify-between gap-2">
            <input
              type="search"
              aria-label="Filter VMs by name"
              placeholder="Filter by name"
              value={filter}
              onChange={(event) => setFilter(event.target.value)}
              className={cn(inputClasses, "max-w-sm flex-1")}
            />
            <p className="text-sm text-zinc-600 tabular-nums dark:text-zinc-400" aria-live="polite">
              {shown.length === vms.length ? vmCount(vms.length) : `${shown.length.toLocaleString("en")} of ${vmCount(vms.length)}`}
            </p>
          </div>
          {shown.length === 0 ? (
            <p className="rounded-xl border border-zinc-200 px-4 py-10 text-center text-sm text-zinc-600 dark:border-zinc-800 dark:text-zinc-400">No VM matches the filter.</p>
          ) : (
            <VmRows vms={shown} volumes={known} />
          )}
        </>
      )}
    </section>
  );
}

function VmListSkeleton() {
  return (
    <div role="status" aria-label="Loading the VMs" className="flex flex-col divide-y divide-zinc-200 rounded-xl border border-zinc-200 dark:divide-zinc-800 dark:border-zinc-800">
      {[0, 1, 2].map((i) => (
        <div key={i} className="flex flex-col gap-2 px-4 py-3 sm:px-5">
          <div className="flex justify-between gap-2">
            <Skeleton className="h-5 w-40" />
            <Skeleton className="h-5 w-56" />
          </div>
          <Skeleton className="h-4 w-72 max-w-full" />
        </div>
      ))}
    </div>
  );
}
