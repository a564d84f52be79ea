"use client";

import { skipToken, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { formatDuration, plural } from "@/lib/format.ts";
import { useVerdict } from "@/components/access/use-verdict.tsx";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { Button } from "@/components/ui/button.tsx";
import { Field, selectClasses } from "@/components/ui/field.tsx";
import { ProgressBar } from "@/components/ui/progress-bar.tsx";
import type { TConformanceRun } from "@/server/api/conformance/schema.ts";
import type { TRegisteredPlugin } from "@/server/api/plugins/schema.ts";
import { ConformanceCounts, ConformanceResults } from "./conformance-results.tsx";

const NO_DATAPATH = "";

function summary(run: TConformanceRun): string {
  const took = run.finishedAt === null ? "" : ` in ${formatDuration((Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / 1000)}`;
  const via = run.datapath === null ? "volume checks only" : `with the ${run.datapath} datapath`;
  switch (run.state) {
    case "running":
      return `Running ${plural(run.total, "check")} (${via})… ${run.results.length} done.`;
    case "finished":
      return run.counts.failed > 0 ? `${plural(run.counts.failed, "check")} failed (${via})${took}.` : `Every check that applies passed (${via})${took}.`;
    case "cancelled":
      return `Stopped after ${plural(run.results.length, "result")} (${via}); the rest was skipped and everything created was removed.`;
    case "error":
      return `The checks could not run (${via}).`;
  }
}

/** "Run conformance checks" on a volume plugin's card: a run is a job on the server, polled every second. */
export function ConformancePanel({ plugin }: { plugin: Pick<TRegisteredPlugin, "type" | "dir" | "name"> }) {
  const checking = useVerdict("conformance.run");
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [datapath, setDatapath] = useState(NO_DATAPATH);
  const [chosen, setChosen] = useState<string | undefined>();

  // The datapaths to offer come from the same scan the page shows (cached).
  const scan = useQuery(trpc.plugins.list.queryOptions());
  const datapaths = scan.data?.plugins.filter((p) => p.kind === "datapath") ?? [];
  // After a reload the last run of this plugin (still running or finished) is shown again.
  const runs = useQuery(trpc.conformance.runs.queryOptions({ plugin: plugin.type }, { refetchOnWindowFocus: false }));
  const runId = chosen ?? runs.data?.runs[0]?.id;
  const current = useQuery(
    trpc.conformance.get.queryOptions(
      runId === undefined ? skipToken : { id: runId },
      { refetchInterval: (query) => (query.state.data?.state === "running" ? 1000 : false), retry: false },
    ),
  );

  const start = useMutation(
    trpc.conformance.run.mutationOptions({
      onSuccess: (run) => {
        queryClient.setQueryData(trpc.conformance.get.queryKey({ id: run.id }), run);
        setChosen(run.id);
      },
    }),
  );
  const stop = useMutation(
    trpc.conformance.cancel.mutationOptions({
      onSuccess: (run) => void queryClient.invalidateQueries({ queryKey: trpc.conformance.get.queryKey({ id: run.id }) }),
    }),
  );

  const run = runId === undefined ? undefined : current.data;
  const running = run?.state === "running";

  return (
    <div className="flex flex-col gap-3 border-t border-zinc-200 pt-4 dark:border-zinc-800">
      <div className="flex flex-col gap-3 sm:flex-row sm:items-end sm:justify-between">
        <Field
          label="Datapath for the data checks"
          hint="Without one, only the volume checks run (faster)."
          className="sm:max-w-xs sm:flex-1"
        >
          {(id, describedBy) => (
            <select id={id} aria-describedby={describedBy} className={selectClasses} value={datapath} disabled={running} onChange={(e) => setDatapath(e.target.value)}>
              <option value={NO_DATAPATH}>None: volume checks only</option>
              {datapaths.map((p) => (
                <option key={p.dir} value={p.type}>
                  {p.type}:// ({p.name})
                </option>
              ))}
            </select>
          )}
        </Field>
        <div className="flex flex-wrap gap-2">
          {running ? (
            <Button variant="secondary" onClick={() => stop.mutate({ id: run.id })} disabled={stop.isPending} aria-label={`Stop the conformance checks on ${plugin.name}`}>
              Stop
            </Button>
          ) : null}
          <Button
            onClick={() => start.mutate({ plugin: plugin.type, datapath: datapath === NO_DATAPATH ? null : datapath })}
            disabled={running || start.isPending}
            aria-busy={running || start.isPending}
            aria-label={`Run conformance checks on ${plugin.name}`}
            deniedReason={checking.reason}
          >
            {running || start.isPending ? "Running checks…" : "Run conformance checks"}
          </Button>
        </div>
      </div>

      {start.error !== null ? (
        <Alert tone="error" title="Could not start the checks">
          {start.error.message}
        </Alert>
      ) : null}
      {stop.error !== null ? (
        <Alert tone="error" title="Could not stop the checks">
          {stop.error.message}
        </Alert>
      ) : null}
      {current.error !== null && runId !== undefined ? (
        <Alert tone="warning" title="Could not follow the checks">
          {current.error.message}
        </Alert>
      ) : null}

      {run !== undefined ? (
        <section aria-label={`Conformance results for ${plugin.name}`} className="flex flex-col gap-3">
          <p role="status" className="text-sm text-zinc-700 dark:text-zinc-300">
            {summary(run)}
          </p>
          {running ? <ProgressBar value={run.total === 0 ? null : run.results.length / run.total} label={`Conformance checks on ${plugin.name}`} /> : null}
          {run.error !== null ? (
            <Alert tone="error" title="The run failed">
              {run.error}
            </Alert>
          ) : null}
          <ConformanceCounts run={run} />
          <ConformanceResults run={run} label={`Checks of ${plugin.name}`} />
        </section>
      ) : null}
    </div>
  );
}
