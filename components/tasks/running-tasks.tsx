"use client";

import { formatBytes, formatPercent } from "@/lib/format.ts";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import { Panel } from "@/components/ui/panel.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import type { TTask } from "@/server/api/tasks/schema.ts";
import { runningFacts, TaskStateBadge } from "./task-bits.tsx";

interface RunningTaskProps {
  task: TTask;
  highlighted: boolean;
  onCancel: () => void;
  cancelling: boolean;
  cancelError: string | undefined;
}

function RunningTask({ task, highlighted, onCancel, cancelling, cancelError }: RunningTaskProps) {
  return (
    <li
      id={`task-${task.uuid}`}
      aria-label={task.title}
      className={cn(
        "flex flex-col gap-2 rounded-xl border border-zinc-200 bg-white p-4 transition-shadow dark:border-zinc-800 dark:bg-zinc-900/60",
        highlighted && "ring-2 ring-sky-500 dark:ring-sky-400",
      )}
    >
      <div className="flex flex-wrap items-start justify-between gap-2">
        <div className="flex min-w-0 flex-col gap-1">
          <p className="font-medium break-words text-zinc-950 dark:text-white">{task.title}</p>
          <div className="flex flex-wrap items-center gap-1.5">
            <TaskStateBadge state={task.state} />
            <Badge mono>{task.kindLabel}</Badge>
            {highlighted ? <Badge tone="info">Just started</Badge> : null}
          </div>
        </div>
        {task.canCancel ? (
          <Button size="sm" variant="secondary" onClick={onCancel} disabled={cancelling} aria-busy={cancelling} aria-label={`Cancel ${task.title}`}>
            {cancelling ? "Cancelling…" : "Cancel"}
          </Button>
        ) : null}
      </div>
      <div className="flex items-center gap-3">
        {/* A mirror has no end to progress towards: an indeterminate bar says it is at work. */}
        <ProgressBar value={task.kind === "data-mirror" ? null : task.progress} label={`Progress of ${task.title}`} className="flex-1" />
        <span className="w-16 text-right text-sm text-zinc-700 tabular-nums dark:text-zinc-300">{task.kind === "data-mirror" ? "Mirroring" : formatPercent(task.progress)}</span>
      </div>
      <p className="text-xs text-zinc-600 tabular-nums dark:text-zinc-400">
        {runningFacts(task).join(" · ")}
        {task.totalBytes !== null ? ` · ${formatBytes(task.totalBytes)} in all` : ""}
      </p>
      {cancelError !== undefined ? (
        <Alert tone="error" title="Could not cancel">
          {cancelError}
        </Alert>
      ) : null}
    </li>
  );
}

export interface RunningTasksProps {
  tasks: TTask[];
  highlight: string | undefined;
  onCancel: (ref: string) => void;
  /** The task whose cancel is under way. */
  cancelling: string | undefined;
  cancelErrors: Record<string, string>;
}

/** The running tasks, each with its progress and Cancel where the toolstack allows it. */
export function RunningTasks({ tasks, highlight, onCancel, cancelling, cancelErrors }: RunningTasksProps) {
  return (
    <section aria-labelledby="running-tasks" className="flex flex-col gap-3">
      <h2 id="running-tasks" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
        Running
      </h2>
      {tasks.length === 0 ? (
        <Panel title="Nothing is running" level={3} description="Copies, mirrors, imports, exports and other long operations show here while they run." />
      ) : (
        <ul aria-label="Running tasks" className="flex flex-col gap-3">
          {tasks.map((task) => (
            <RunningTask
              key={task.ref}
              task={task}
              highlighted={task.ref === highlight}
              onCancel={() => onCancel(task.ref)}
              cancelling={cancelling === task.ref}
              cancelError={cancelErrors[task.ref]}
            />
          ))}
        </ul>
      )}
    </section>
  );
}
