"use client";

import { useQuery } from "@tanstack/react-query";
import { formatBytes, plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { TVmSummary } from "@/server/api/vms/schema.ts";
import { DiskLine, diskTotals, linkClasses, PowerBadge, vmHref } from "./vm-bits.tsx";
import { IntentLink } from "@/components/ui/intent-link.tsx";

/** The VMs page body: every VM the toolstack knows, refreshed every 5 s while the page is visible. */
export function VmList() {
  const trpc = useTRPC();
  const list = useQuery(trpc.vms.list.queryOptions(undefined, { refetchInterval: 5000 }));

  if (list.data === undefined) {
    return list.isError ? <QueryError error={list.error} what="the VMs" onRetry={() => void list.refetch()} /> : <VmListSkeleton />;
  }
  return (
    <section aria-labelledby="vm-list-heading" className="flex flex-col gap-3">
      <h2 id="vm-list-heading" className="sr-only">
        Virtual machines
      </h2>
      {list.isError ? <QueryError error={list.error} what="the latest VM list" onRetry={() => void list.refetch()} /> : null}
      {list.data.vms.length === 0 ? (
        <Panel
          title="No VMs yet"
          description="Drop an .xva, an .ova or a disk image above to import a VM. A VM created through XenAPI appears here within 5 seconds."
        />
      ) : (
        <>
          <p className="text-sm text-zinc-600 dark:text-zinc-400">{plural(list.data.vms.length, "VM")}</p>
          <ul className="flex flex-col divide-y divide-zinc-200 rounded-xl border border-zinc-200 bg-white shadow-xs dark:divide-zinc-800 dark:border-zinc-800 dark:bg-zinc-900/60">
            {list.data.vms.map((vm) => (
              <VmRow key={vm.ref} vm={vm} />
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

function VmRow({ vm }: { vm: TVmSummary }) {
  return (
    <li className="flex flex-col gap-2 px-4 py-3 sm:px-5">
      <div className="flex flex-wrap items-center justify-between gap-2">
        <div className="flex min-w-0 flex-wrap items-center gap-2">
          <IntentLink href={vmHref(vm.ref)} className={linkClasses}>
            {vm.name || "(no name)"}
          </IntentLink>
          <PowerBadge state={vm.powerState} />
        </div>
        <p className="text-sm text-zinc-600 tabular-nums dark:text-zinc-400">
          {formatBytes(vm.memoryBytes)} memory · {plural(vm.vcpus, "vCPU")} · {diskTotals(vm.disks)}
        </p>
      </div>
      {vm.description ? <p className="line-clamp-1 text-xs text-zinc-600 dark:text-zinc-400">{vm.description}</p> : null}
      {vm.disks.length > 0 ? (
        <ul aria-label={`Drives of ${vm.name}`} className="flex flex-col gap-1 border-l-2 border-zinc-200 pl-3 dark:border-zinc-800">
          {vm.disks.map((disk) => (
            <li key={disk.vbdRef}>
              <DiskLine disk={disk} />
            </li>
          ))}
        </ul>
      ) : null}
    </li>
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
