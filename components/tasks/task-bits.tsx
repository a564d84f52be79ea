import { formatDuration, formatRate, formatTimeLeft } from "@/lib/format.ts";
import { Badge, type BadgeTone } from "@/components/ui/badge.tsx";
import type { TTask, TTaskState } from "@/server/api/tasks/schema.ts";

/** A task's state as the page shows it; "interrupted" is the page's own: the task vanished while watched. */
export type ShownState = TTaskState | "interrupted";

const STATE_WORDS: Record<ShownState, { label: string; tone: BadgeTone }> = {
  running: { label: "Running", tone: "info" },
  cancelling: { label: "Cancelling", tone: "warning" },
  succeeded: { label: "Succeeded", tone: "success" },
  failed: { label: "Failed", tone: "danger" },
  cancelled: { label: "Cancelled", tone: "neutral" },
  interrupted: { label: "Interrupted", tone: "warning" },
};

export function TaskStateBadge({ state }: { state: ShownState }) {
  const { label, tone } = STATE_WORDS[state];
  return <Badge tone={tone}>{label}</Badge>;
}

/** "85.2 MB/s · 3 min left · running 1 min", with what is known. */
export function runningFacts(task: TTask): string[] {
  const facts: string[] = [];
  if (task.rateBytesPerS !== null) facts.push(formatRate(task.rateBytesPerS));
  if (task.etaS !== null) facts.push(formatTimeLeft(task.etaS));
  else if (task.kind === "data-mirror") facts.push("runs until cancelled");
  facts.push(`running ${formatDuration(task.durationS)}`);
  return facts;
}
