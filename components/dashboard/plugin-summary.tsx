import Link from "next/link";
import { plural } from "@/lib/format.ts";
import { Badge } from "@/components/ui/badge.tsx";
import { Card, CardDescription, CardHeader, CardTitle } from "@/components/ui/card.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { api } from "@/server/api/caller.ts";
import type { TListPluginsResponse } from "@/server/api/plugins/schema.ts";

const linkClasses =
  "mt-3 inline-flex w-fit items-center gap-1 rounded text-sm font-medium text-zinc-900 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100 dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

/** Counts from the same plugins.list scan the Plugins page shows, rendered on the server. */
export async function PluginSummary() {
  let scan: TListPluginsResponse;
  try {
    scan = await api.plugins.list();
  } catch (error) {
    return (
      <Panel tone="danger" level={3} title="Could not scan the plugin root" description={error instanceof Error ? error.message : String(error)} />
    );
  }

  const volumes = scan.plugins.filter((plugin) => plugin.kind === "volume").length;
  const datapaths = scan.plugins.length - volumes;
  return (
    <div className="flex flex-col gap-4">
      <div className="grid gap-4 sm:grid-cols-2">
        <Card as="section" aria-labelledby="summary-registered">
          <CardHeader>
            <CardTitle id="summary-registered" className="text-sm font-medium text-zinc-600 dark:text-zinc-400">
              Registered plugins
            </CardTitle>
            <p className="text-3xl font-semibold tracking-tight text-zinc-950 tabular-nums dark:text-white">{scan.plugins.length}</p>
            <CardDescription>
              {plural(volumes, "volume plugin")}, {plural(datapaths, "datapath plugin")}
            </CardDescription>
            <Link href="/plugins" className={linkClasses}>
              View plugins
            </Link>
          </CardHeader>
        </Card>
        <Card as="section" aria-labelledby="summary-skipped">
          <CardHeader>
            <div className="flex items-center justify-between gap-2">
              <CardTitle id="summary-skipped" className="text-sm font-medium text-zinc-600 dark:text-zinc-400">
                Skipped plugins
              </CardTitle>
              {scan.skipped.length > 0 ? <Badge tone="warning">Needs attention</Badge> : null}
            </div>
            <p className="text-3xl font-semibold tracking-tight text-zinc-950 tabular-nums dark:text-white">{scan.skipped.length}</p>
            <CardDescription>
              {scan.skipped.length > 0 ? "Found in the plugin root but not registered." : "Every plugin in the root registered."}
            </CardDescription>
            {scan.skipped.length > 0 ? (
              <Link href="/plugins#skipped-plugins" className={linkClasses}>
                See why they were skipped
              </Link>
            ) : null}
          </CardHeader>
        </Card>
      </div>
      <p className="text-sm text-zinc-600 dark:text-zinc-400">
        Plugin root <code className="font-mono break-all text-zinc-900 dark:text-zinc-100">{scan.root}</code>
      </p>
    </div>
  );
}

export function PluginSummarySkeleton() {
  return (
    <SkeletonGroup label="Scanning the plugin root…" className="flex flex-col gap-4">
      <div className="grid gap-4 sm:grid-cols-2">
        <Skeleton className="h-40 rounded-xl" />
        <Skeleton className="h-40 rounded-xl" />
      </div>
    </SkeletonGroup>
  );
}
