"use client";

import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { formatBytes, formatDuration, formatPercent, formatRate, formatRelativeTime, plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import type { TListTasksResponse, TTask } from "@/server/api/tasks/schema.ts";
import { DataTaskDialog } from "./data-task-dialog.tsx";
import { HISTORY_FILTERS, type HistoryFilter } from "./history-filter.ts";
import { runningFacts, type ShownState, TaskStateBadge } from "./task-bits.tsx";
import { useTasks } from "./use-tasks.ts";

/** History rows drawn at first; the rest behind "Show more" (a day of tasks can be thousands). */
const HISTORY_PAGE = 100;

const isRunning = (task: TTask) => task.state === "running" || task.state === "cancelling";

/** A task the page last saw running and the toolstack no longer lists. */
interface Vanished {
  task: TTask;
  at: number;
}

/**
 * Tasks that vanished while the page watched: a running task is never removed by a client (the toolstack
 * refuses), so one that is gone was lost (another toolstack behind the URL, its database reset).
 */
function useVanished(data: TListTasksResponse | undefined): Vanished[] {
  // State derived from the previous listing, updated during render (React's "storing information from
  // previous renders"), so no effect and no extra render pass.
  const [seen, setSeen] = useState<{ data: TListTasksResponse | undefined; vanished: Vanished[] }>({ data: undefined, vanished: [] });
  if (data !== seen.data) {
    let vanished = seen.vanished;
    if (seen.data !== undefined && data !== undefined) {
      const now = new Set(data.tasks.map((task) => task.ref));
      const lost = seen.data.tasks.filter((task) => isRunning(task) && !now.has(task.ref)).map((task) => ({ task, at: Date.parse(data.now) }));
      if (lost.length > 0) vanished = [...lost, ...vanished];
    }
    setSeen({ data, vanished });
  }
  return seen.vanished;
}

function RunningTask({ task, highlighted, onCancel, cancelling, cancelError }: { task: TTask; highlighted: boolean; onCancel: () => void; cancelling: boolean; cancelError: string | undefined }) {
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

function HistoryRow({ task, state, now, highlighted, onRemove, removing }: { task: TTask; state: ShownState; now: number; highlighted: boolean; onRemove?: () => void; removing: boolean }) {
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

function TasksSkeleton() {
  return (
    <SkeletonGroup label="Loading the tasks…" className="flex flex-col gap-6">
      <Skeleton className="h-32 rounded-xl" />
      <Skeleton className="h-64 rounded-xl" />
    </SkeletonGroup>
  );
}

export function TaskPage({ initialFilter = "all" }: { initialFilter?: HistoryFilter }) {
  const copying = useVerdict("volumes.dataCopy");
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const query = useTasks();
  const vanished = useVanished(query.data);
  const [dialog, setDialog] = useState<{ open: boolean; key: number }>({ open: false, key: 0 });
  const [highlight, setHighlight] = useState<string | undefined>();
  const [filter, setFilter] = useState<HistoryFilter>(initialFilter);
  const [text, setText] = useState("");
  const [shown, setShown] = useState(HISTORY_PAGE);
  const [cancelErrors, setCancelErrors] = useState<Record<string, string>>({});

  const invalidate = () => queryClient.invalidateQueries({ queryKey: trpc.tasks.list.queryKey() });
  const cancel = useMutation(
    trpc.tasks.cancel.mutationOptions({
      onSuccess: (_, { ref }) => setCancelErrors(({ [ref]: _gone, ...rest }) => rest),
      onError: (error, { ref }) => setCancelErrors((errors) => ({ ...errors, [ref]: error.message })),
      onSettled: invalidate,
    }),
  );
  const remove = useMutation(trpc.tasks.destroy.mutationOptions({ onSettled: invalidate }));

  const tasks = query.data?.tasks ?? [];
  const running = tasks.filter(isRunning);
  const highlightedTask = highlight === undefined ? undefined : tasks.find((task) => task.ref === highlight);

  // The task just started is brought into view once the list has it, where it is (running, or already done).
  const highlightUuid = highlightedTask?.uuid;
  useEffect(() => {
    if (highlightUuid !== undefined) document.getElementById(`task-${highlightUuid}`)?.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }, [highlightUuid]);

  const now = query.data === undefined ? 0 : Date.parse(query.data.now);
  const needle = text.trim().toLowerCase();
  const history: Array<{ task: TTask; state: ShownState; vanished: boolean }> = [
    ...vanished.map(({ task }) => ({ task, state: "interrupted" as const, vanished: true })),
    ...tasks.filter((task) => !isRunning(task)).map((task) => ({ task, state: task.state as ShownState, vanished: false })),
  ];
  const matching = history.filter(
    ({ task, state }) =>
      (filter === "all" || state === filter) &&
      (needle === "" || [task.title, task.name, task.kindLabel, task.error ?? ""].some((field) => field.toLowerCase().includes(needle))),
  );

  return (
    <div className="flex flex-col gap-8">
      <div className="flex flex-wrap items-center justify-between gap-3">
        <p className="text-sm text-zinc-600 dark:text-zinc-400" aria-live="polite">
          {/* The Running panel below says when nothing runs; this line announces changes in the count. */}
          {query.data === undefined || running.length === 0 ? "\u00a0" : `${plural(running.length, "task")} running.`}
        </p>
        <Button onClick={() => setDialog(({ key }) => ({ open: true, key: key + 1 }))} deniedReason={copying.reason}>
          Copy or mirror a volume
        </Button>
      </div>
      <DataTaskDialog
        key={dialog.key}
        open={dialog.open}
        onClose={() => setDialog((d) => ({ ...d, open: false }))}
        onStarted={(task) => {
          setHighlight(task);
          setDialog((d) => ({ ...d, open: false }));
        }}
      />

      {highlight !== undefined && highlightedTask !== undefined ? (
        <p role="status" className="sr-only">
          Started: {highlightedTask.title}
        </p>
      ) : null}

      {query.error !== null && query.data === undefined ? (
        <QueryError error={query.error} what="the tasks" onRetry={() => void query.refetch()} />
      ) : query.data === undefined ? (
        <TasksSkeleton />
      ) : (
        <>
          {query.error !== null ? (
            <Alert tone="warning" title="The task list is not updating">
              {query.error.message} The last known state is shown; it refreshes by itself when the toolstack answers again.
            </Alert>
          ) : null}

          <section aria-labelledby="running-tasks" className="flex flex-col gap-3">
            <h2 id="running-tasks" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
              Running
            </h2>
            {running.length === 0 ? (
              <Panel title="Nothing is running" level={3} description="Copies, mirrors, imports, exports and other long operations show here while they run." />
            ) : (
              <ul aria-label="Running tasks" className="flex flex-col gap-3">
                {running.map((task) => (
                  <RunningTask
                    key={task.ref}
                    task={task}
                    highlighted={task.ref === highlight}
                    onCancel={() => cancel.mutate({ ref: task.ref })}
                    cancelling={cancel.isPending && cancel.variables?.ref === task.ref}
                    cancelError={cancelErrors[task.ref]}
                  />
                ))}
              </ul>
            )}
          </section>

          <section aria-labelledby="task-history" className="flex flex-col gap-3">
            <div className="flex flex-col gap-3 sm:flex-row sm:items-end sm:justify-between">
              <h2 id="task-history" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
                History
              </h2>
              <div className="grid grid-cols-1 gap-3 sm:w-auto sm:grid-cols-[10rem_16rem]">
                <Field label="Status">
                  {(id) => (
                    <select id={id} className={selectClasses} value={filter} onChange={(e) => (setFilter(e.target.value as HistoryFilter), setShown(HISTORY_PAGE))}>
                      {HISTORY_FILTERS.map((value) => (
                        <option key={value} value={value}>
                          {value === "all" ? "All" : value[0]!.toUpperCase() + value.slice(1)}
                        </option>
                      ))}
                    </select>
                  )}
                </Field>
                <Field label="Search">
                  {(id) => (
                    <input id={id} type="search" className={inputClasses} value={text} placeholder="Name, kind or reason" onChange={(e) => (setText(e.target.value), setShown(HISTORY_PAGE))} />
                  )}
                </Field>
              </div>
            </div>
            {remove.error !== null ? (
              <Alert tone="error" title="Could not remove the task">
                {remove.error.message}
              </Alert>
            ) : null}
            {history.length === 0 ? (
              <Panel title="No finished tasks" level={3} description="Finished tasks stay here for a day, with their outcome and, for failures, the reason." />
            ) : matching.length === 0 ? (
              <Panel title="No task matches" level={3} description={`None of the ${plural(history.length, "finished task")} matches this filter.`} />
            ) : (
              <>
                <p className="text-xs text-zinc-600 dark:text-zinc-400" aria-live="polite">
                  {matching.length === history.length ? plural(history.length, "finished task") : `${matching.length} of ${plural(history.length, "finished task")}`}
                </p>
                <ul aria-label="Finished tasks" className="divide-y divide-zinc-200 overflow-hidden rounded-xl border border-zinc-200 bg-white dark:divide-zinc-800 dark:border-zinc-800 dark:bg-zinc-900/60">
                  {matching.slice(0, shown).map(({ task, state, vanished: lost }) => (
                    <HistoryRow
                      key={`${lost ? "lost" : "task"}-${task.ref}`}
                      task={task}
                      state={state}
                      now={now}
                      highlighted={task.ref === highlight}
                      onRemove={task.canDestroy && !lost ? () => remove.mutate({ ref: task.ref }) : undefined}
                      removing={remove.isPending && remove.variables?.ref === task.ref}
                    />
                  ))}
                </ul>
                {matching.length > shown ? (
                  <Button variant="secondary" className="self-center" onClick={() => setShown((n) => n + HISTORY_PAGE)}>
                    Show {Math.min(HISTORY_PAGE, matching.length - shown)} more
                  </Button>
                ) : null}
              </>
            )}
          </section>
        </>
      )}
    </div>
  );
}
