"use client";

import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { plural } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import { DataTaskDialog } from "./data-task-dialog.tsx";
import type { HistoryFilter } from "./history-filter.ts";
import { RunningTasks } from "./running-tasks.tsx";
import { TaskHistory } from "./task-history.tsx";
import { useRunningTasks } from "./use-tasks.ts";
import { useVanished } from "./use-vanished.ts";

function TasksSkeleton() {
  return (
    <SkeletonGroup label="Loading the tasks…" className="flex flex-col gap-6">
      <Skeleton className="h-32 rounded-xl" />
      <Skeleton className="h-64 rounded-xl" />
    </SkeletonGroup>
  );
}

/** The task page: the running tasks, polled every second, and the history, a page at a time. */
export function TaskPage({ initialFilter = "all" }: { initialFilter?: HistoryFilter }) {
  const copying = useVerdict("volumes.dataCopy");
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const query = useRunningTasks();
  const vanished = useVanished(query.data);
  const [dialog, setDialog] = useState<{ open: boolean; key: number }>({ open: false, key: 0 });
  const [highlight, setHighlight] = useState<string | undefined>();
  const [cancelErrors, setCancelErrors] = useState<Record<string, string>>({});

  const cancel = useMutation(
    trpc.tasks.cancel.mutationOptions({
      onSuccess: (_, { ref }) => setCancelErrors(({ [ref]: _gone, ...rest }) => rest),
      onError: (error, { ref }) => setCancelErrors((errors) => ({ ...errors, [ref]: error.message })),
      onSettled: () => queryClient.invalidateQueries({ queryKey: trpc.tasks.list.queryKey() }),
    }),
  );

  const running = query.data?.running ?? [];
  // The task just started is running, or among the latest finished if it was quick.
  const highlightedTask = highlight === undefined ? undefined : [...running, ...(query.data?.finished ?? [])].find((task) => task.ref === highlight);

  // The task just started is brought into view once the list has it, where it is (running, or already done).
  const highlightUuid = highlightedTask?.uuid;
  useEffect(() => {
    if (highlightUuid !== undefined) document.getElementById(`task-${highlightUuid}`)?.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }, [highlightUuid]);

  return (
    <div className="flex flex-col gap-8">
      <div className="flex flex-wrap items-center justify-between gap-3">
        <p className="text-sm text-zinc-600 dark:text-zinc-400" aria-live="polite">
          {/* The Running panel below says when nothing runs; this line announces changes in the count. */}
          {query.data === undefined || query.data.totalRunning === 0 ? "\u00a0" : `${plural(query.data.totalRunning, "task")} running.`}
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
          <RunningTasks
            tasks={running}
            highlight={highlight}
            onCancel={(ref) => cancel.mutate({ ref })}
            cancelling={cancel.isPending ? cancel.variables?.ref : undefined}
            cancelErrors={cancelErrors}
          />
          <TaskHistory initialFilter={initialFilter} vanished={vanished} allFinished={query.data.totalFinished} now={Date.parse(query.data.now)} highlight={highlight} />
        </>
      )}
    </div>
  );
}
