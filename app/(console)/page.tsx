import Link from "next/link";
import { Suspense } from "react";
import { HostSummary } from "@/components/dashboard/host-summary.tsx";
import { PluginSummary, PluginSummarySkeleton } from "@/components/dashboard/plugin-summary.tsx";
import { StorageSummary } from "@/components/dashboard/storage-summary.tsx";
import { PageHeader } from "@/components/page-header.tsx";
import { RecentFailures, RunningTasksSummary } from "@/components/tasks/task-summary.tsx";

const headingClasses = "text-lg font-semibold tracking-tight text-zinc-950 dark:text-white";
const linkClasses =
  "rounded text-sm font-medium text-zinc-900 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100 dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

export default function DashboardPage() {
  return (
    <>
      <PageHeader title="Dashboard" description="What this Hangar pool can see right now: storage health and space, its hosts, work in progress, recent failures." />

      <section aria-labelledby="dashboard-storage" className="flex flex-col gap-4">
        <div className="flex flex-wrap items-baseline justify-between gap-2">
          <h2 id="dashboard-storage" className={headingClasses}>
            Storage
          </h2>
          <Link href="/storage" className={linkClasses}>
            View storage
          </Link>
        </div>
        <StorageSummary />
      </section>

      <section aria-labelledby="dashboard-hosts" className="flex flex-col gap-4">
        <div className="flex flex-wrap items-baseline justify-between gap-2">
          <h2 id="dashboard-hosts" className={headingClasses}>
            Hosts
          </h2>
          <Link href="/hosts" className={linkClasses}>
            View hosts
          </Link>
        </div>
        <HostSummary />
      </section>

      <section aria-labelledby="dashboard-tasks" className="flex flex-col gap-4">
        <h2 id="dashboard-tasks" className={headingClasses}>
          Tasks
        </h2>
        <div className="grid items-start gap-4 lg:grid-cols-2">
          <RunningTasksSummary />
          <RecentFailures />
        </div>
      </section>

      <section aria-labelledby="dashboard-plugins" className="flex flex-col gap-4">
        <h2 id="dashboard-plugins" className={headingClasses}>
          Storage plugins
        </h2>
        <Suspense fallback={<PluginSummarySkeleton />}>
          <PluginSummary />
        </Suspense>
      </section>
    </>
  );
}
