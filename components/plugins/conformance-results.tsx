import { formatDuration, plural } from "@/lib/format.ts";
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

function ResultList({ results, label }: { results: TConformanceRun["results"]; label: string }) {
  return (
    <ol aria-label={label} className="divide-y divide-zinc-200 rounded-lg border border-zinc-200 text-sm dark:divide-zinc-800 dark:border-zinc-800">
      {results.map((result, i) => {
        const { label: status, tone } = STATUS[result.status];
        return (
          <li key={`${i}-${result.name}`} aria-label={`${status}: ${result.name}`} className="grid grid-cols-[4.5rem_1fr_auto] items-start gap-x-3 gap-y-1 px-3 py-2">
            <Badge tone={tone} className="justify-center">
              {status}
            </Badge>
            <p className="min-w-0 break-words text-zinc-900 dark:text-zinc-100">{result.name}</p>
            <span className="text-xs text-zinc-500 tabular-nums dark:text-zinc-400">{duration(result.durationMs)}</span>
            {result.reason !== null ? (
              <p
                className={
                  result.status === "failed"
                    ? "col-start-2 col-end-4 break-words text-red-800 dark:text-red-300"
                    : "col-start-2 col-end-4 break-words text-zinc-600 dark:text-zinc-400"
                }
              >
                {result.reason}
              </p>
            ) : null}
          </li>
        );
      })}
    </ol>
  );
}

/**
 * A run's checks: those that failed or made a note first, then every check in the order it ran (a
 * disclosure: fifty-odd rows are long on a phone).
 */
export function ConformanceResults({ run, label }: { run: TConformanceRun; label: string }) {
  if (run.results.length === 0) return null;
  const attention = run.results.filter((result) => result.status === "failed" || result.status === "note");
  return (
    <div className="flex flex-col gap-3">
      {attention.length > 0 ? <ResultList results={attention} label={`${label} that need attention`} /> : null}
      <details open className="group flex flex-col gap-2">
        <summary className="cursor-pointer rounded text-sm font-medium text-zinc-800 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:text-zinc-200">
          All {plural(run.results.length, "check")}, in the order they ran
        </summary>
        <div className="mt-2">
          <ResultList results={run.results} label={label} />
        </div>
      </details>
    </div>
  );
}
