"use client";

import { useQuery } from "@tanstack/react-query";
import { plural } from "@/lib/format.ts";
import { HOST_LIST_REFETCH_MS } from "@/components/hosts/host-list.tsx";
import { hostNote, hostTitle, LiveBadge } from "@/components/hosts/host-status.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";

/** The dashboard's hosts part: one line while all are live; the offline ones listed with what it means. */
export function HostSummary() {
  const trpc = useTRPC();
  const list = useQuery(trpc.hosts.list.queryOptions(undefined, { refetchInterval: HOST_LIST_REFETCH_MS }));
  const hosts = list.data?.hosts;
  if (list.isError) return <QueryError error={list.error} what="the hosts" onRetry={() => void list.refetch()} />;
  if (hosts === undefined) {
    return (
      <>
        <p role="status" className="sr-only">
          Loading the hosts…
        </p>
        <Skeleton className="h-5 w-72 max-w-full" />
      </>
    );
  }
  const master = hosts.find((host) => host.isMaster);
  const offline = hosts.filter((host) => !host.live);
  if (offline.length === 0) {
    const masterWords = master === undefined ? "no master is recorded" : `the master is ${hostTitle(master)}`;
    return (
      <p className="text-sm text-zinc-600 dark:text-zinc-400">
        {hosts.length === 1 && master !== undefined ? `The only host, ${hostTitle(master)}, is live and the pool's master.` : `All ${plural(hosts.length, "host")} are live; ${masterWords}.`}
      </p>
    );
  }
  return (
    <Panel level={3} tone="danger" title="Hosts offline" description={`${offline.length} of ${plural(hosts.length, "host")} offline: their SRs cannot be reached.`}>
      <ul className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800">
        {offline.map((host) => (
          <li key={host.ref} className="flex flex-col gap-1.5 py-2.5 first:pt-0 last:pb-0 sm:flex-row sm:items-start sm:gap-4">
            <span className="text-sm font-medium break-words text-zinc-900 sm:w-48 sm:shrink-0 dark:text-zinc-100">{hostTitle(host)}</span>
            <div className="flex min-w-0 flex-col items-start gap-1">
              <LiveBadge live={host.live} />
              <p className="text-xs break-words text-zinc-600 dark:text-zinc-400">{hostNote(host)}</p>
            </div>
          </li>
        ))}
      </ul>
    </Panel>
  );
}
