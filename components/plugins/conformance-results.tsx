import { formatDuration, plural } from "@/components/format.ts";
import { Badge, type BadgeTone } from "@/components/ui/badge.tsx";
import type { TConformanceRun } from "@/server/api/conformance/schema.ts";

const STATUS: Record<TConformanceRun["results"][number]["status"], { label: string; tone: BadgeTone }> = {
  passed: { label: "Passed", tone: "success" },
  failed: { label: "Failed", tone: "danger" },
  skipped: { label: "Skipped", tone: "neutral" },
  note: { label: "Note", tone: "warning" },
};

function duration(ms: number): string {
  return ms < 1000 ? `${ms} ms` : formatDuration(ms / 1000);
}

/** The counts of a run, as badges: "50 passed · 0 failed · 6 skipped · 0 notes". */
export function ConformanceCounts({ run }: { run: TConformanceRun }) {
  const { passed, failed, skipped, notes } = run.counts;
  return (
    <ul aria-label="Check counts" className="flex flex-wrap gap-1.5">
      <li>
        <Badge tone="success">{passed} passed</Badge>
      </li>
      <li>
        <Badge tone={failed > 0 ? "danger" : "neutral"}>{failed} failed</Badge>
      </li>
      <li>
        <Badge>{skipped} skipped</Badge>
      </li>
      <li>
        <Badge tone={notes > 0 ? "warning" : "neutral"}>{plural(notes, "note")}</Badge>
      </li>
    </ul>
  );
}

/** Every check of a run in the order it ran, with its status, how long it took and, unless it passed, why. */
export function ConformanceResults({ run, label }: { run: TConformanceRun; label: string }) {
  if (run.results.length === 0) return null;
  return (
    <ol aria-label={label} className="divide-y divide-zinc-200 rounded-lg border border-zinc-200 text-sm dark:divide-zinc-800 dark:border-zinc-800">
      {run.results.map((result, i) => {
        const { label: status, tone } = STATUS[result.status];
        return (
          <li key={`${i}-${result.name}`} aria-label={`${status}: ${result.name}`} className="flex flex-col gap-1 px-3 py-2 sm:flex-row sm:items-start sm:gap-3">
            <Badge tone={tone} className="w-16 justify-center self-start">
              {status}
            </Badge>
            <div className="min-w-0 flex-1">
              <p className="break-words text-zinc-900 dark:text-zinc-100">{result.name}</p>
              {result.reason !== null ? (
                <p className={result.status === "failed" ? "mt-0.5 break-words text-red-800 dark:text-red-300" : "mt-0.5 break-words text-zinc-600 dark:text-zinc-400"}>
                  {result.reason}
                </p>
              ) : null}
            </div>
            <span className="text-xs text-zinc-500 tabular-nums sm:pt-0.5 dark:text-zinc-400">{duration(result.durationMs)}</span>
          </li>
        );
      })}
    </ol>
  );
}
