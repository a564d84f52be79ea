import Link from "next/link";
import { Suspense, type ReactNode } from "react";
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

      <DashboardSection id="dashboard-storage" title="Storage" link={{ href: "/storage", label: "View storage" }}>
        <StorageSummary />
      </DashboardSection>

      <DashboardSection id="dashboard-hosts" title="Hosts" link={{ href: "/hosts", label: "View hosts" }}>
        <HostSummary />
      </DashboardSection>

      <DashboardSection id="dashboard-tasks" title="Tasks">
        <div className="grid items-start gap-4 lg:grid-cols-2">
          <RunningTasksSummary />
          <RecentFailures />
        </div>
      </DashboardSection>

      <DashboardSection id="dashboard-plugins" title="Storage plugins">
        <Suspense fallback={<PluginSummarySkeleton />}>
          <PluginSummary />
        </Suspense>
      </DashboardSection>
    </>
  );
}

/** One part of the dashboard: its heading, with a link to the page that has the rest beside it. */
function DashboardSection({ id, title, link, children }: { id: string; title: string; link?: { href: string; label: string }; children: ReactNode }) {
  const heading = (
    <h2 id={id} className={headingClasses}>
      {title}
    </h2>
  );
  return (
    <section aria-labelledby={id} className="flex flex-col gap-4">
      {link ? (
        <div className="flex flex-wrap items-baseline justify-between gap-2">
          {heading}
          <Link href={link.href} className={linkClasses}>
            {link.label}
          </Link>
        </div>
      ) : (
        heading
      )}
      {children}
    </section>
  );
}
