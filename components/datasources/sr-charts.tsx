"use client";

import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { useId, useState } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Alert } from "@/components/ui/alert.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import type { TSeriesResponse } from "@/server/api/datasources/schema.ts";
import { formatClock, formatDatasourceValue } from "./chart-format.ts";
import { CHART_HEIGHT, type ChartLine, type ChartRow, DatasourceChart } from "./datasource-chart.tsx";
import { RangeSelector, type RangeSeconds } from "./range-selector.tsx";

const READ = "#0ea5e9"; // sky-500
const WRITE = "#f59e0b"; // amber-500
const SPACE = "#10b981"; // emerald-500

const COLLECTING = "Collecting samples — the first point appears within 5 s";
const COLLECTING_RATE = "Collecting samples — rates appear with the second sample, within 10 s";

interface ChartSpec {
  title: string;
  lines: ChartLine[];
  units: string;
  /** What the plugin must report for this chart. */
  requires: string[];
  summary: (latest: (name: string) => number | null, units: string) => string;
  rate: boolean;
}

/** A chart of a read and a write datasource, summarised as "Read …, write …" with `after` appended. */
function readWriteChart(title: string, [read, write]: [string, string], units: string, rate: boolean, after = ""): ChartSpec {
  return {
    title,
    lines: [
      { key: read, label: "Read", color: READ },
      { key: write, label: "Write", color: WRITE },
    ],
    units,
    requires: [read, write],
    rate,
    summary: (latest, units) => `Read ${formatDatasourceValue(latest(read), units)}, write ${formatDatasourceValue(latest(write), units)}${after}`,
  };
}

const CHARTS: ChartSpec[] = [
  {
    title: "Free space",
    lines: [{ key: "free_space", label: "Free space", color: SPACE }],
    units: "B",
    requires: ["free_space"],
    rate: false,
    summary: (latest, units) => {
      const free = latest("free_space");
      const total = latest("total_space");
      if (free === null) return "No value yet";
      return total === null ? `${formatDatasourceValue(free, units)} free` : `${formatDatasourceValue(free, units)} free of ${formatDatasourceValue(total, units)}`;
    },
  },
  readWriteChart("Throughput", ["io_read_bytes", "io_write_bytes"], "B/s", true),
  readWriteChart("IOPS", ["iops_read", "iops_write"], "requests/s", true),
  readWriteChart("Latency", ["read_latency", "write_latency"], "ms", false, " (average)"),
];

/** The SR page's performance charts: its datasources sampled server-side every 5 s, polled while the page is visible. */
export function SrCharts({ srRef }: { srRef: string }) {
  const trpc = useTRPC();
  const headingId = useId();
  const [range, setRange] = useState<RangeSeconds>(300);
  // refetchInterval pauses while the tab is hidden (refetchIntervalInBackground stays false).
  const series = useQuery(
    trpc.datasources.series.queryOptions({ srRef, rangeSeconds: range }, { refetchInterval: 5000, placeholderData: keepPreviousData }),
  );

  return (
    <section aria-labelledby={headingId} className="flex flex-col gap-3">
      <div className="flex flex-wrap items-center justify-between gap-3">
        <div className="flex flex-wrap items-baseline gap-x-3">
          <h2 id={headingId} className="text-lg font-semibold tracking-tight text-zinc-950 dark:text-white">
            Performance
          </h2>
          <p className="text-xs text-zinc-600 dark:text-zinc-400">{samplingNote(series.data)}</p>
        </div>
        <RangeSelector value={range} onChange={setRange} />
      </div>
      {series.data === undefined ? (
        series.isError ? (
          <div style={{ minHeight: CHART_HEIGHT }}>
            <QueryError error={series.error} what="the SR's charts" onRetry={() => void series.refetch()} />
          </div>
        ) : (
          <ChartsSkeleton />
        )
      ) : (
        <>
          {series.isError ? <QueryError error={series.error} what="new samples" onRetry={() => void series.refetch()} /> : null}
          {series.data.error ? (
            <Alert tone="warning" title="Sampling has stopped for now">
              {series.data.error} The charts show the samples taken before.
            </Alert>
          ) : null}
          <Charts data={series.data} now={series.dataUpdatedAt} />
        </>
      )}
    </section>
  );
}

/** "Sampled every 5 s since 14:05", so a chart that covers part of its range says why. */
function samplingNote(data: TSeriesResponse | undefined): string {
  if (data === undefined || data.t.length === 0) return "Sampled every 5 s";
  const first = data.t[0]!;
  const full = first <= (data.t.at(-1) ?? first) - (data.rangeSeconds - 2 * data.intervalSeconds) * 1000;
  return full ? `Sampled every ${data.intervalSeconds} s` : `Sampled every ${data.intervalSeconds} s since ${formatClock(first)}`;
}

function Charts({ data, now }: { data: TSeriesResponse; now: number }) {
  const rows: ChartRow[] = data.t.map((t, i) => {
    const row: ChartRow = { t };
    for (const [name, values] of Object.entries(data.values)) row[name] = values[i] ?? null;
    return row;
  });
  const reported = new Set(data.datasources.map((source) => source.name));
  const unitsOf = (name: string, fallback: string) => data.datasources.find((source) => source.name === name)?.units ?? fallback;
  /** The newest non-null value of a datasource in the range. */
  const latest = (name: string): number | null => {
    const values = data.values[name] ?? [];
    for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null && values[i] !== undefined) return values[i]!;
    return null;
  };
  const end = Math.max(now, data.t.at(-1) ?? 0);
  const domain: [number, number] = [end - data.rangeSeconds * 1000, end];

  return (
    <div className="grid gap-3 md:grid-cols-2">
      {CHARTS.map((chart) => {
        const units = unitsOf(chart.requires[0]!, chart.units);
        const missing = data.t.length > 0 && !chart.requires.some((name) => reported.has(name));
        const hasPoint = chart.lines.some((line) => latest(line.key) !== null);
        const placeholder = missing ? `This SR's plugin reports no ${chart.title.toLowerCase()}.` : hasPoint ? undefined : chart.rate && data.t.length > 0 ? COLLECTING_RATE : COLLECTING;
        return (
          <DatasourceChart
            key={chart.title}
            title={chart.title}
            summary={missing ? "Not reported" : hasPoint ? chart.summary(latest, units) : "Collecting samples"}
            lines={chart.lines}
            rows={rows}
            units={units}
            domain={domain}
            placeholder={placeholder}
          />
        );
      })}
    </div>
  );
}

function ChartsSkeleton() {
  return (
    <div className="grid gap-3 md:grid-cols-2" role="status" aria-label="Loading the SR's charts">
      {CHARTS.map((chart) => (
        <div key={chart.title} className="flex flex-col gap-2 rounded-xl border border-zinc-200 p-3 sm:p-4 dark:border-zinc-800">
          <Skeleton className="h-5 w-40" />
          <Skeleton className="h-4 w-24" />
          <Skeleton style={{ height: CHART_HEIGHT }} />
        </div>
      ))}
    </div>
  );
}
