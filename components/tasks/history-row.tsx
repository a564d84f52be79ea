import { formatBytes, formatDuration, formatRate, formatRelativeTime } from "@/lib/format.ts";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import type { TTask } from "@/server/api/tasks/schema.ts";
import { type ShownState, TaskStateBadge } from "./task-bits.tsx";

export interface HistoryRowProps {
  task: TTask;
  state: ShownState;
  /** The listing's time (ms): ages agree with the server's clock. */
  now: number;
  highlighted: boolean;
  onRemove?: () => void;
  removing: boolean;
}

/** One finished task: its outcome, when, how long, how much and how fast, and why it failed. */
export function HistoryRow({ task, state, now, highlighted, onRemove, removing }: HistoryRowProps) {
  const facts = [
    task.finished === null ? "vanished" : `finished ${formatRelativeTime(task.finished, now)}`,
    `took ${formatDuration(task.durationS)}`,
    ...(task.totalBytes !== null ? [formatBytes(task.totalBytes)] : []),
    ...(task.rateBytesPerS !== null && state === "succeeded" ? [`${formatRate(task.rateBytesPerS)} on average`] : []),
  ];
  return (
    <li
      id={`task-${task.uuid}`}
      aria-label={task.title}
      className={cn("flex flex-col gap-1.5 px-4 py-3 sm:flex-row sm:items-start sm:justify-between sm:gap-4", highlighted && "bg-sky-50 dark:bg-sky-950/30")}
    >
      <div className="flex min-w-0 flex-col gap-1">
        <div className="flex flex-wrap items-center gap-1.5">
          <TaskStateBadge state={state} />
          <span className="min-w-0 text-sm font-medium break-words text-zinc-950 dark:text-white">{task.title}</span>
          <Badge mono>{task.kindLabel}</Badge>
        </div>
        <p className="text-xs text-zinc-600 tabular-nums dark:text-zinc-400">{facts.join(" · ")}</p>
        {state === "failed" && task.error !== null ? <p className="text-sm break-words text-red-800 dark:text-red-300">{task.error}</p> : null}
        {state === "interrupted" ? (
          <p className="text-sm text-amber-900 dark:text-amber-300">The toolstack stopped listing this task while it ran: its outcome is unknown.</p>
        ) : null}
      </div>
      {onRemove !== undefined ? (
        <Button size="sm" variant="ghost" className="self-start" onClick={onRemove} disabled={removing} aria-busy={removing} aria-label={`Remove ${task.title} from the history`}>
          {removing ? "Removing…" : "Remove"}
        </Button>
      ) : null}
    </li>
  );
}
