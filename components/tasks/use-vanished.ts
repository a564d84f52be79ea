"use client";

import { useState } from "react";
import type { TListTasksResponse, TTask } from "@/server/api/tasks/schema.ts";

/** A task the page last saw running and the toolstack no longer lists. */
export interface Vanished {
  task: TTask;
  at: number;
}

/**
 * Whether the latest finished tasks of `now` reach back to the listing before: a task that left the running ones
 * since then is among them unless it vanished. (Finished times are whole seconds: a second of margin.)
 */
function covers(now: TListTasksResponse, before: TListTasksResponse): boolean {
  const oldest = now.finished.at(-1)?.finished;
  return now.finished.length >= now.totalFinished || (oldest != null && Date.parse(oldest) < Date.parse(before.now) - 1000);
}

/**
 * Tasks that vanished while the page watched: a running task is never removed by a client (the toolstack
 * refuses), so one that is gone was lost (another toolstack behind the URL, its database reset).
 */
export function useVanished(data: TListTasksResponse | undefined): Vanished[] {
  // State derived from the previous listing, updated during render (React's "storing information from
  // previous renders"), so no effect and no extra render pass.
  const [seen, setSeen] = useState<{ data: TListTasksResponse | undefined; vanished: Vanished[] }>({ data: undefined, vanished: [] });
  if (data !== seen.data) {
    let vanished = seen.vanished;
    if (seen.data !== undefined && data !== undefined && covers(data, seen.data)) {
      const listed = new Set([...data.running, ...data.finished].map((task) => task.ref));
      const lost = seen.data.running.filter((task) => !listed.has(task.ref)).map((task) => ({ task, at: Date.parse(data.now) }));
      if (lost.length > 0) vanished = [...lost, ...vanished];
    }
    setSeen({ data, vanished });
  }
  return seen.vanished;
}
