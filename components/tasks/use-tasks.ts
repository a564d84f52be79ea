"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";

/** How often the task list is asked for while the page is visible. */
export const TASK_POLL_MS = 1000;

/**
 * The toolstack's tasks, asked for every second. React Query stops the interval while the tab is hidden
 * (refetchIntervalInBackground stays false), so a hidden console costs the toolstack nothing.
 */
export function useTasks() {
  const trpc = useTRPC();
  return useQuery(trpc.tasks.list.queryOptions(undefined, { refetchInterval: TASK_POLL_MS, refetchIntervalInBackground: false }));
}
