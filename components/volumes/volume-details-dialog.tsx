"use client";

import { useQuery } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { formatBytes } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import type { VolumeActionDialogProps } from "./volume-dialog-props.ts";

const CONTENT: Record<string, string> = { Data: "Data", Data_and_CBT_Metadata: "Data and CBT metadata", CBT_Metadata: "CBT metadata only (data destroyed)" };

/** Everything the plugin says of one volume (Volume.stat), read fresh when opened. */
export function VolumeDetailsDialog({ srRef, volume, onClose }: Omit<VolumeActionDialogProps, "onDone">) {
  const trpc = useTRPC();
  const stat = useQuery(trpc.volumes.stat.queryOptions({ srRef, key: volume.key }, { staleTime: 0 }));
  const data = stat.data;
  const rows: Array<[string, ReactNode]> = data
    ? [
        ["Name", data.name || "(no name)"],
        ["Description", data.description || "—"],
        ["Size", `${formatBytes(data.virtualSize)} (${data.virtualSize.toLocaleString("en")} bytes)`],
        ["Used", formatBytes(data.physicalUtilisation)],
        ["Access", data.readWrite ? "Read and write" : "Read-only"],
        ["Sharable", data.sharable ? "Yes" : "No"],
        ["Content", CONTENT[data.volumeType ?? ""] ?? data.volumeType ?? "Not stated"],
        ["CBT", data.cbtEnabled ? "On" : "Off"],
        ["Snapshot of", volume.isSnapshot ? (volume.snapshotOf?.name ?? "(original gone)") : "—"],
        ["UUID", <span key="uuid" className="font-mono text-xs break-all">{data.uuid}</span>],
        ["Key", <span key="key" className="font-mono text-xs break-all">{data.key}</span>],
      ]
    : [];
  const keys = data ? Object.entries(data.keys).sort(([a], [b]) => a.localeCompare(b)) : [];
  return (
    <Dialog open onClose={onClose} title={`Details of “${volume.name}”`} description="As the SR's plugin reports the volume now.">
      {data ? (
        <>
          <dl className="grid grid-cols-[max-content_1fr] gap-x-4 gap-y-1.5 text-sm">
            {rows.map(([term, value]) => (
              <div key={term} className="contents">
                <dt className="text-zinc-500 dark:text-zinc-400">{term}</dt>
                <dd className="min-w-0">{value}</dd>
              </div>
            ))}
          </dl>
          <div>
            <h3 className="text-sm font-medium">Metadata on the volume</h3>
            {keys.length === 0 ? (
              <p className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">None.</p>
            ) : (
              <ul className="mt-1 flex flex-col gap-0.5 font-mono text-xs">
                {keys.map(([k, v]) => (
                  <li key={k} className="break-all">
                    {k} = {v}
                  </li>
                ))}
              </ul>
            )}
          </div>
        </>
      ) : stat.isError ? (
        <Alert tone="error" title="Could not read the volume">
          {stat.error.message}
        </Alert>
      ) : (
        <SkeletonGroup label="Loading…" className="flex flex-col gap-2">
          {Array.from({ length: 8 }, (_, i) => (
            <Skeleton key={i} className="h-5 w-full" />
          ))}
        </SkeletonGroup>
      )}
      <FormButtons cancelLabel="Close" onCancel={onClose} />
    </Dialog>
  );
}
