"use client";

import Link from "next/link";
import { formatPercent, formatRelativeTime, plural } from "@/lib/format.ts";
import { Panel } from "@/components/ui/panel.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { runningFacts, TaskStateBadge } from "./task-bits.tsx";
import { useRunningTasks, useTaskHistory } from "./use-tasks.ts";

/** Failures shown on the dashboard; the task page has the whole history. */
const RECENT_FAILURES = 5;
/** Running tasks shown on the dashboard before "and N more". */
const RUNNING_SHOWN = 5;

const linkClasses =
  "rounded text-sm font-medium text-zinc-900 underline decoration-zinc-300 underline-offset-4 hover:decoration-zinc-900 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-100 dark:decoration-zinc-600 dark:hover:decoration-zinc-100";

function ListSkeleton({ what }: { what: string }) {
  return (
    <SkeletonGroup label={`Loading ${what}…`} className="flex flex-col gap-3">
      <Skeleton className="h-12" />
      <Skeleton className="h-12" />
    </SkeletonGroup>
  );
}

/** Running tasks with their progress, for the dashboard. */
export function RunningTasksSummary() {
  const query = useRunningTasks();
  const running = query.data?.running ?? [];
  const total = query.data?.totalRunning ?? 0;
  return (
    <Panel
      title="Running tasks"
      level={3}
      description={query.data === undefined ? "Work the toolstack is doing now." : total === 0 ? "Nothing is running." : `${plural(total, "task")} running.`}
      actions={
        <Link href="/tasks" className={linkClasses}>
          All tasks
        </Link>
      }
    >
      {query.error !== null && query.data === undefined ? (
        <QueryError error={query.error} what="the tasks" onRetry={() => void query.refetch()} />
      ) : query.data === undefined ? (
        <ListSkeleton what="running tasks" />
      ) : running.length === 0 ? null : (
        <ul className="flex flex-col gap-3">
          {running.slice(0, RUNNING_SHOWN).map((task) => (
            <li key={task.ref} className="flex flex-col gap-1.5">
              <div className="flex flex-wrap items-baseline justify-between gap-x-3 gap-y-1 text-sm">
                <span className="min-w-0 font-medium break-words text-zinc-900 dark:text-zinc-100">{task.title}</span>
                <span className="text-zinc-600 tabular-nums dark:text-zinc-400">{task.kind === "data-mirror" ? "Mirroring" : formatPercent(task.progress)}</span>
              </div>
              <ProgressBar value={task.kind === "data-mirror" ? null : task.progress} label={`Progress of ${task.title}`} />
              <p className="text-xs text-zinc-600 tabular-nums dark:text-zinc-400">{runningFacts(task).join(" · ")}</p>
            </li>
          ))}
          {total > RUNNING_SHOWN ? (
            <li className="text-sm text-zinc-600 dark:text-zinc-400">and {plural(total - RUNNING_SHOWN, "more task")} on the task page.</li>
          ) : null}
        </ul>
      )}
    </Panel>
  );
}

/** The last failed tasks with their reason in words, for the dashboard. */
export function RecentFailures() {
  const query = useTaskHistory({ status: "failed", limit: RECENT_FAILURES });
  const failures = query.data?.finished ?? [];
  // The listing's own time: ages agree with the server's clock, and rendering stays pure.
  const now = query.data === undefined ? 0 : Date.parse(query.data.now);
  return (
    <Panel
      title="Recent failures"
      level={3}
      tone={failures.length > 0 ? "danger" : "neutral"}
      description={query.data === undefined ? "Tasks that failed, and why." : failures.length === 0 ? "No task has failed." : "The last tasks that failed, and why."}
      actions={
        <Link href="/tasks?status=failed" className={linkClasses}>
          Task history
        </Link>
      }
    >
      {query.error !== null && query.data === undefined ? (
        <QueryError error={query.error} what="the tasks" onRetry={() => void query.refetch()} />
      ) : query.data === undefined ? (
        <ListSkeleton what="recent failures" />
      ) : failures.length === 0 ? null : (
        <ul className="flex flex-col divide-y divide-zinc-200 dark:divide-zinc-800">
          {failures.map((task) => (
            <li key={task.ref} className="flex flex-col gap-1 py-2 first:pt-0 last:pb-0">
              <div className="flex flex-wrap items-center gap-2 text-sm">
                <TaskStateBadge state="failed" />
                <span className="min-w-0 font-medium break-words text-zinc-900 dark:text-zinc-100">{task.title}</span>
                <span className="text-xs text-zinc-600 dark:text-zinc-400">{task.finished === null ? "" : formatRelativeTime(task.finished, now)}</span>
              </div>
              <p className="text-sm break-words text-red-800 dark:text-red-300">{task.error}</p>
            </li>
          ))}
        </ul>
      )}
    </Panel>
  );
}
