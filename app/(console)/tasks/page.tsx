import type { Metadata } from "next";
import { PageHeader } from "@/components/page-header.tsx";
import { HISTORY_FILTERS } from "@/components/tasks/history-filter.ts";
import { TaskPage } from "@/components/tasks/task-page.tsx";

export const metadata: Metadata = { title: "Tasks" };

export default async function TasksPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  // ?status=failed (the dashboard's "Task history" link) opens the history filtered.
  const status = (await searchParams).status;
  const filter = HISTORY_FILTERS.find((value) => value === status) ?? "all";
  return (
    <>
      <PageHeader
        title="Tasks"
        description="Every toolstack task: copies, mirrors, imports, exports, SR and volume operations. Running ones update every second while this page is visible."
      />
      <TaskPage initialFilter={filter} />
    </>
  );
}
