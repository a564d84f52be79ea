"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Panel } from "@/components/ui/panel.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { useDebouncedValue } from "@/components/ui/use-debounced-value.ts";
import type { TTask } from "@/server/api/tasks/schema.ts";
import type { HistoryFilter } from "./history-filter.ts";
import { HistoryFilters } from "./history-filters.tsx";
import { HistoryPager } from "./history-pager.tsx";
import { HistoryRow } from "./history-row.tsx";
import type { ShownState } from "./task-bits.tsx";
import { useTaskHistory } from "./use-tasks.ts";
import type { Vanished } from "./use-vanished.ts";

/** Finished tasks per page. */
const HISTORY_PAGE = 100;
/** How long typing must pause before the text goes to the server. */
const TYPING_PAUSE_MS = 300;

const finishedTasks = (n: number) => `${n.toLocaleString("en")} finished task${n === 1 ? "" : "s"}`;

/** A vanished task is matched here, as the toolstack matches the others (its call name or description). */
const matches = (task: TTask, needle: string) => needle === "" || [task.title, task.name].some((field) => field.toLowerCase().includes(needle));

export interface TaskHistoryProps {
  initialFilter: HistoryFilter;
  vanished: Vanished[];
  /** Finished tasks in all, unfiltered (from the running listing): when it changes, the page shown is asked for again. */
  allFinished: number;
  /** The listing's time (ms). */
  now: number;
  highlight: string | undefined;
}

/** The finished tasks, newest first, filtered and paged by the toolstack; tasks seen to vanish first. */
export function TaskHistory({ initialFilter, vanished, allFinished, now, highlight }: TaskHistoryProps) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [filter, setFilter] = useState<HistoryFilter>(initialFilter);
  const [text, setText] = useState("");
  const [page, setPage] = useState(0);
  const needle = useDebouncedValue(text.trim().toLowerCase(), TYPING_PAUSE_MS);
  const status = filter === "all" || filter === "interrupted" ? undefined : filter;
  const history = useTaskHistory({ status, text: needle || undefined, offset: page * HISTORY_PAGE, limit: HISTORY_PAGE }, filter !== "interrupted");
  const remove = useMutation(trpc.tasks.destroy.mutationOptions({ onSettled: () => queryClient.invalidateQueries({ queryKey: trpc.tasks.list.queryKey() }) }));

  // A task finished (or left the history): the page shown changes, before its next poll.
  const { refetch } = history;
  const finishedBefore = useRef(allFinished);
  useEffect(() => {
    if (finishedBefore.current === allFinished) return;
    finishedBefore.current = allFinished;
    if (filter !== "interrupted") void refetch();
  }, [allFinished, filter, refetch]);

  const lost = page === 0 && (filter === "all" || filter === "interrupted") ? vanished.filter(({ task }) => matches(task, needle)) : [];
  const finished = filter === "interrupted" ? [] : (history.data?.finished ?? []);
  const rows: Array<{ task: TTask; state: ShownState; vanished: boolean }> = [
    ...lost.map(({ task }) => ({ task, state: "interrupted" as const, vanished: true })),
    ...finished.map((task) => ({ task, state: task.state as ShownState, vanished: false })),
  ];
  const matching = filter === "interrupted" ? lost.length : (history.data?.totalFinished ?? 0);
  const all = allFinished + vanished.length;
  const pages = Math.ceil(matching / HISTORY_PAGE);
  const filtered = filter !== "all" || needle !== "";
  const range = pages > 1 ? `${(page * HISTORY_PAGE + 1).toLocaleString("en")}–${Math.min(matching, (page + 1) * HISTORY_PAGE).toLocaleString("en")} of ` : "";

  return (
    <section aria-labelledby="task-history" className="flex flex-col gap-3">
      <div className="flex flex-col gap-3 sm:flex-row sm:items-end sm:justify-between">
        <h2 id="task-history" className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
          History
        </h2>
        <HistoryFilters filter={filter} text={text} onFilter={(value) => (setFilter(value), setPage(0))} onText={(value) => (setText(value), setPage(0))} />
      </div>
      {remove.error !== null ? (
        <Alert tone="error" title="Could not remove the task">
          {remove.error.message}
        </Alert>
      ) : null}
      {all === 0 ? (
        <Panel title="No finished tasks" level={3} description="Finished tasks stay here for a day, with their outcome and, for failures, the reason." />
      ) : history.error !== null && history.data === undefined ? (
        <QueryError error={history.error} what="the task history" onRetry={() => void history.refetch()} />
      ) : history.data === undefined && filter !== "interrupted" ? (
        <SkeletonGroup label="Loading the task history…" className="flex flex-col gap-2">
          <Skeleton className="h-14 rounded-xl" />
          <Skeleton className="h-14 rounded-xl" />
        </SkeletonGroup>
      ) : rows.length === 0 ? (
        <Panel title="No task matches" level={3} description={`None of the ${finishedTasks(all)} matches this filter.`} />
      ) : (
        <>
          <p className="text-xs text-zinc-600 tabular-nums dark:text-zinc-400" aria-live="polite">
            {range}
            {filtered ? `${matching.toLocaleString("en")} of ${finishedTasks(all)}` : finishedTasks(all)}
          </p>
          <ul
            aria-label="Finished tasks"
            aria-busy={history.isPlaceholderData}
            className="divide-y divide-zinc-200 overflow-hidden rounded-xl border border-zinc-200 bg-white dark:divide-zinc-800 dark:border-zinc-800 dark:bg-zinc-900/60"
          >
            {rows.map(({ task, state, vanished: gone }) => (
              <HistoryRow
                key={`${gone ? "lost" : "task"}-${task.ref}`}
                task={task}
                state={state}
                now={now}
                highlighted={task.ref === highlight}
                onRemove={task.canDestroy && !gone ? () => remove.mutate({ ref: task.ref }) : undefined}
                removing={remove.isPending && remove.variables?.ref === task.ref}
              />
            ))}
          </ul>
          <HistoryPager page={page} pages={pages} onPage={setPage} />
        </>
      )}
    </section>
  );
}
