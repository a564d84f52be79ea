import type { Metadata } from "next";
import { NotBuiltPanel } from "@/components/not-built-panel.tsx";
import { PageHeader } from "@/components/page-header.tsx";

export const metadata: Metadata = { title: "Tasks" };

export default function TasksPage() {
  return (
    <>
      <PageHeader title="Tasks" description="Long-running work on this host." />
      <NotBuiltPanel
        area="Tasks"
        planned={[
          "Running and finished toolstack tasks (imports, exports, copies) with their progress.",
          "Uploads in progress beside the imports they feed, and where a broken one will resume.",
          "Data operations (copy and mirror) reported by the plugins through Data.stat.",
          "Cancelling a task and reading why one failed.",
        ]}
      />
    </>
  );
}
