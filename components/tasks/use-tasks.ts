"use client";

import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import type { TFinishedState } from "@/server/api/tasks/schema.ts";

/** How often the running tasks are asked for while the page is visible. */
export const TASK_POLL_MS = 1000;
/** How often a page of the history is asked for; the page also asks again whenever a task finishes. */
export const HISTORY_POLL_MS = 5000;
/**
 * Finished tasks the running listing carries, the latest: a task that leaves the running ones is found among
 * them, or known to have vanished.
 */
export const RECENT_FINISHED = 10;

/**
 * The running tasks (with the latest finished ones and the history's size), asked for every second. React Query
 * stops the interval while the tab is hidden (refetchIntervalInBackground stays false), so a hidden console costs
 * the toolstack nothing.
 */
export function useRunningTasks() {
  const trpc = useTRPC();
  return useQuery(trpc.tasks.list.queryOptions({ limit: RECENT_FINISHED }, { refetchInterval: TASK_POLL_MS, refetchIntervalInBackground: false }));
}

export interface HistoryQuery {
  status?: TFinishedState;
  text?: string;
  offset?: number;
  limit?: number;
}

/** One page of the finished tasks, filtered by the toolstack; the page shown stays while the next one loads. */
export function useTaskHistory(query: HistoryQuery, enabled = true) {
  const trpc = useTRPC();
  return useQuery(
    trpc.tasks.list.queryOptions(query, { refetchInterval: HISTORY_POLL_MS, refetchIntervalInBackground: false, placeholderData: keepPreviousData, enabled }),
  );
}
