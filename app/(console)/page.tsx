import Link from "next/link";
import { Suspense } from "react";
import { PluginSummary, PluginSummarySkeleton } from "@/components/dashboard/plugin-summary.tsx";
import { PageHeader } from "@/components/page-header.tsx";
import { Badge } from "@/components/ui/badge.tsx";

const plannedAreas = [
  { href: "/storage", label: "Storage", what: "SRs and their volumes" },
  { href: "/vms", label: "VMs", what: "VM import and export" },
  { href: "/tasks", label: "Tasks", what: "Progress of long-running work" },
];

export default function DashboardPage() {
  return (
    <>
      <PageHeader title="Dashboard" description="What this Hangar host can see right now." />

      <section aria-labelledby="dashboard-plugins" className="flex flex-col gap-4">
        <h2 id="dashboard-plugins" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
          Storage plugins
        </h2>
        <Suspense fallback={<PluginSummarySkeleton />}>
          <PluginSummary />
        </Suspense>
      </section>

      <section aria-labelledby="dashboard-areas" className="flex flex-col gap-4">
        <h2 id="dashboard-areas" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
          Console areas
        </h2>
        <ul className="divide-y divide-zinc-200 rounded-xl border border-zinc-200 bg-white dark:divide-zinc-800 dark:border-zinc-800 dark:bg-zinc-900/60">
          {plannedAreas.map((area) => (
            <li key={area.href} className="flex flex-wrap items-center justify-between gap-2 px-4 py-3">
              <div className="min-w-0">
                <Link href={area.href} className="text-sm font-medium text-zinc-900 hover:underline focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100">
                  {area.label}
                </Link>
                <p className="text-sm text-zinc-600 dark:text-zinc-400">{area.what}</p>
              </div>
              <Badge tone="info">Not built yet</Badge>
            </li>
          ))}
        </ul>
      </section>
    </>
  );
}
