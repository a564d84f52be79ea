"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useId, useState } from "react";
import { formatBytes, plural } from "@/lib/format.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { PageHeader } from "@/components/page-header.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Button, buttonClasses } from "@/components/ui/button.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { ExportDialog } from "@/components/transfers/export-dialog.tsx";
import type { TGetVmResponse } from "@/server/api/vms/schema.ts";
import { DestroyVmDialog } from "./destroy-vm-dialog.tsx";
import { EditVmDialog } from "./edit-vm-dialog.tsx";
import { DiskLine, PowerBadge } from "./vm-bits.tsx";

type Open = "rename" | "description" | "export" | "destroy" | null;

/** One VM's page: overview, drives (with links to their SRs), interfaces; rename, describe, destroy. */
export function VmDetails({ vmRef, initial }: { vmRef: string; initial: TGetVmResponse | null }) {
  const trpc = useTRPC();
  const vm = useQuery(trpc.vms.get.queryOptions({ ref: vmRef }, { refetchInterval: 5000, initialData: initial ?? undefined, retry: (count, error) => error.data?.code !== "NOT_FOUND" && count < 2 }));
  const [open, setOpen] = useState<Open>(null);
  const destroyHintId = useId();
  const rename = useVerdict("vms.rename");
  const describe = useVerdict("vms.setDescription");
  const exporting = useVerdict("vms.export");
  const destroying = useVerdict("vms.destroy");

  if (vm.error?.data?.code === "NOT_FOUND") {
    return (
      <>
        <PageHeader title="VM not found" />
        <Panel tone="warning" title="This VM no longer exists" description="It may have been destroyed in another window or by another client.">
          <Link href="/vms" className={buttonClasses({ variant: "secondary", size: "sm" })}>
            Back to the VMs
          </Link>
        </Panel>
      </>
    );
  }
  if (vm.data === undefined) {
    return vm.isError ? (
      <>
        <PageHeader title="VM" />
        <QueryError error={vm.error} what="the VM" onRetry={() => void vm.refetch()} />
      </>
    ) : (
      <DetailsSkeleton />
    );
  }

  const data = vm.data;
  const canDestroy = data.allowedOperations.includes("destroy");
  const close = () => setOpen(null);
  return (
    <>
      <PageHeader title={data.name || "(no name)"} description={data.description || "No description."}>
        <div className="flex flex-col items-start gap-1.5 sm:items-end">
          <div className="flex flex-wrap gap-2">
            <Button variant="secondary" onClick={() => setOpen("rename")} deniedReason={rename.reason}>
              Rename
            </Button>
            <Button variant="secondary" onClick={() => setOpen("description")} deniedReason={describe.reason}>
              Edit description
            </Button>
            <Button variant="secondary" onClick={() => setOpen("export")} deniedReason={exporting.reason}>
              Export
            </Button>
            <Button
              variant="danger"
              onClick={() => setOpen("destroy")}
              disabled={!canDestroy}
              aria-describedby={canDestroy ? undefined : destroyHintId}
              deniedReason={destroying.reason}
            >
              Destroy
            </Button>
          </div>
          {canDestroy ? null : (
            <p id={destroyHintId} className="text-xs text-zinc-600 dark:text-zinc-400">
              The toolstack does not allow destroying this VM now (it is {data.powerState.toLowerCase()}).
            </p>
          )}
        </div>
      </PageHeader>

      {vm.isError ? <QueryError error={vm.error} what="the latest state of the VM" onRetry={() => void vm.refetch()} /> : null}

      <Panel title="Overview">
        <dl className="grid grid-cols-1 gap-x-6 gap-y-3 text-sm sm:grid-cols-2 lg:grid-cols-4">
          <Fact term="Power state">
            <PowerBadge state={data.powerState} />
          </Fact>
          <Fact term="Memory">
            {formatBytes(data.memoryBytes)}
            {data.memoryMinBytes !== data.memoryBytes ? <span className="text-zinc-600 dark:text-zinc-400"> (at least {formatBytes(data.memoryMinBytes)})</span> : null}
          </Fact>
          <Fact term="vCPUs">{data.vcpusAtStartup === data.vcpus ? data.vcpus : `${data.vcpusAtStartup} at start-up, up to ${data.vcpus}`}</Fact>
          <Fact term="UUID">
            <span className="font-mono text-xs break-all">{data.uuid}</span>
          </Fact>
        </dl>
      </Panel>

      <ListPanel title="Drives" count={data.disks.length} noun="drive" none="This VM has no disks or CD drives.">
        {data.disks.map((disk) => (
          <li key={disk.vbdRef} className="flex flex-wrap items-center justify-between gap-2 py-2">
            <DiskLine disk={disk} />
            <span className="text-xs text-zinc-600 dark:text-zinc-400">
              {disk.mode === "RO" ? "read-only" : "read-write"}
              {disk.bootable ? " · bootable" : ""}
            </span>
          </li>
        ))}
      </ListPanel>

      <ListPanel title="Network interfaces" count={data.interfaces.length} noun="interface" none="This VM has no network interfaces.">
        {data.interfaces.map((vif) => (
          <li key={vif.ref} className="flex flex-wrap items-center gap-x-4 gap-y-1 py-2 text-sm">
            <span className="font-medium text-zinc-800 dark:text-zinc-200">Interface {vif.device}</span>
            <span className="font-mono text-xs text-zinc-700 dark:text-zinc-300">{vif.mac}</span>
            <span className="text-zinc-600 dark:text-zinc-400">on {vif.networkName ?? "a network that cannot be read"}</span>
            <span className="text-zinc-600 tabular-nums dark:text-zinc-400">MTU {vif.mtu}</span>
          </li>
        ))}
      </ListPanel>

      <EditVmDialog vm={data} field={open === "rename" ? "name" : open === "description" ? "description" : null} onClose={close} />
      <DestroyVmDialog vm={data} open={open === "destroy"} onClose={close} />
      <ExportDialog vm={data} open={open === "export"} onClose={close} />
    </>
  );
}

/** A panel listing the VM's devices of one kind: how many in its description, none said in words. */
function ListPanel({ title, count, noun, none, children }: { title: string; count: number; noun: string; none: string; children: React.ReactNode }) {
  return (
    <Panel title={title} description={count === 0 ? none : plural(count, noun)}>
      {count > 0 ? <ul className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800">{children}</ul> : null}
    </Panel>
  );
}

function Fact({ term, children }: { term: string; children: React.ReactNode }) {
  return (
    <div className="flex min-w-0 flex-col gap-1">
      <dt className="text-xs font-medium text-zinc-500 dark:text-zinc-400">{term}</dt>
      <dd className="text-zinc-900 dark:text-zinc-100">{children}</dd>
    </div>
  );
}

function DetailsSkeleton() {
  return (
    <div role="status" aria-label="Loading the VM" className="flex flex-col gap-8">
      <div className="flex flex-col gap-2 border-b border-zinc-200 pb-6 dark:border-zinc-800">
        <Skeleton className="h-8 w-64" />
        <Skeleton className="h-4 w-40" />
      </div>
      <Skeleton className="h-28" />
      <Skeleton className="h-40" />
    </div>
  );
}
