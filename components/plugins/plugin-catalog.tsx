"use client";

import { useQuery } from "@tanstack/react-query";
import { useId } from "react";
import { plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { useScrollToHash } from "@/components/ui/use-scroll-to-hash.ts";
import type { TListPluginsResponse, TRegisteredPlugin } from "@/server/api/plugins/schema.ts";
import { PluginCard } from "./plugin-card.tsx";
import { SkippedPluginsPanel } from "./skipped-plugins-panel.tsx";

const groups = [
  {
    kind: "volume",
    title: "Volume plugins",
    description: "Control plane: each SR type is served by one volume plugin that creates, snapshots and destroys its volumes.",
    none: "No volume plugins are registered.",
  },
  {
    kind: "datapath",
    title: "Datapath plugins",
    description: "Data plane: chosen by the URI scheme of a volume to connect it to a VM.",
    none: "No datapath plugins are registered.",
  },
] as const;

/** The Plugins page body: loads the scan, then shows the plugin root, skipped plugins and both groups. */
export function PluginCatalog() {
  const trpc = useTRPC();
  const list = useQuery(trpc.plugins.list.queryOptions());
  // The dashboard links to #skipped-plugins, a section that exists only once the scan has loaded.
  useScrollToHash(list.data !== undefined);

  if (list.data === undefined) {
    return list.isError ? (
      <Panel
        tone="danger"
        title="Could not load plugins"
        description={list.error.message}
        actions={
          <Button variant="secondary" size="sm" onClick={() => void list.refetch()} aria-busy={list.isFetching}>
            Try again
          </Button>
        }
      />
    ) : (
      <CatalogSkeleton />
    );
  }

  const { plugins, skipped } = list.data;
  return (
    <>
      <RootSummary
        scan={list.data}
        scanning={list.isFetching}
        onRescan={() => void list.refetch()}
      />
      {list.isError ? (
        <Panel tone="danger" title="Rescan failed" description={`${list.error.message} The plugins below are from the previous scan.`} />
      ) : null}
      {plugins.length === 0 ? (
        <Panel
          title="No plugins registered"
          description={
            <>
              The plugin root holds no working plugin. A volume plugin is a directory <code className="font-mono">volume/&lt;dir&gt;</code>{" "}
              and a datapath plugin a directory <code className="font-mono">datapath/&lt;scheme&gt;</code>, each with an executable{" "}
              <code className="font-mono">Plugin.Query</code>.
            </>
          }
        />
      ) : null}
      {skipped.length > 0 ? <SkippedPluginsPanel skipped={skipped} /> : null}
      {plugins.length > 0
        ? groups.map((group) => (
            <PluginGroup key={group.kind} {...group} plugins={plugins.filter((plugin) => plugin.kind === group.kind)} />
          ))
        : null}
    </>
  );
}

function RootSummary({ scan, scanning, onRescan }: { scan: TListPluginsResponse; scanning: boolean; onRescan: () => void }) {
  return (
    <div className="flex flex-col gap-3 rounded-xl border border-zinc-200 bg-white px-4 py-3 sm:flex-row sm:items-center sm:justify-between dark:border-zinc-800 dark:bg-zinc-900/60">
      <dl className="flex min-w-0 flex-col gap-x-8 gap-y-2 text-sm sm:flex-row sm:items-center">
        <div className="min-w-0">
          <dt className="text-xs text-zinc-500 dark:text-zinc-400">Plugin root</dt>
          <dd className="font-mono text-sm break-all text-zinc-900 dark:text-zinc-100">{scan.root}</dd>
        </div>
        <div className="flex gap-8">
          <div>
            <dt className="text-xs text-zinc-500 dark:text-zinc-400">Registered</dt>
            <dd className="font-medium tabular-nums">{scan.plugins.length}</dd>
          </div>
          <div>
            <dt className="text-xs text-zinc-500 dark:text-zinc-400">Skipped</dt>
            <dd className="font-medium tabular-nums">{scan.skipped.length}</dd>
          </div>
        </div>
      </dl>
      <Button variant="secondary" size="sm" onClick={onRescan} aria-busy={scanning} className="self-start sm:self-auto">
        {scanning ? "Scanning…" : "Rescan"}
      </Button>
    </div>
  );
}

function PluginGroup({ title, description, none, plugins }: { title: string; description: string; none: string; plugins: TRegisteredPlugin[] }) {
  const headingId = useId();
  return (
    <section aria-labelledby={headingId} className="flex flex-col gap-4">
      <div>
        <div className="flex items-center gap-2">
          <h2 id={headingId} className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
            {title}
          </h2>
          <Badge>{plural(plugins.length, "plugin")}</Badge>
        </div>
        <p className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">{description}</p>
      </div>
      {plugins.length > 0 ? (
        <div className="flex flex-col gap-4">
          {plugins.map((plugin) => (
            <PluginCard key={`${plugin.kind}/${plugin.dir}`} plugin={plugin} />
          ))}
        </div>
      ) : (
        <p className="rounded-xl border border-dashed border-zinc-300 px-4 py-6 text-center text-sm text-zinc-500 dark:border-zinc-700 dark:text-zinc-400">
          {none}
        </p>
      )}
    </section>
  );
}

function CatalogSkeleton() {
  return (
    <SkeletonGroup label="Scanning the plugin root…" showLabel className="flex flex-col gap-6">
      <Skeleton className="h-16 rounded-xl" />
      <Skeleton className="h-80 rounded-xl" />
      <Skeleton className="h-80 rounded-xl" />
    </SkeletonGroup>
  );
}
