"use client";

import { useId, type ReactNode } from "react";
import { Area, AreaChart, CartesianGrid, Tooltip, XAxis, YAxis, type TooltipContentProps } from "recharts";
import { formatClock, formatClockSeconds, formatDatasourceValue } from "./chart-format.ts";

export interface ChartLine {
  key: string;
  label: string;
  /** A colour that reads on light and dark backgrounds alike. */
  color: string;
}

export type ChartRow = { t: number } & Record<string, number | null>;

export interface DatasourceChartProps {
  title: string;
  /** The latest value in words: the figure's text alternative. */
  summary: ReactNode;
  lines: ChartLine[];
  rows: ChartRow[];
  units: string;
  /** The time axis, ms since the epoch: the whole selected range, so a filling chart grows from the right. */
  domain: [number, number];
  /** Shown instead of the chart, in the same space (collecting, or a datasource the plugin does not report). */
  placeholder?: string;
}

/** Chart height, fixed: data arriving never moves the page. */
export const CHART_HEIGHT = 144;

/** One datasource chart as a figure: its title is the accessible name, its caption the latest value. */
export function DatasourceChart({ title, summary, lines, rows, units, domain, placeholder }: DatasourceChartProps) {
  const titleId = useId();
  const summaryId = useId();
  return (
    <figure
      aria-labelledby={titleId}
      aria-describedby={summaryId}
      className="flex min-w-0 flex-col gap-2 rounded-xl border border-zinc-200 bg-white p-3 sm:p-4 dark:border-zinc-800 dark:bg-zinc-900/60"
    >
      <figcaption className="flex flex-wrap items-baseline justify-between gap-x-3 gap-y-0.5">
        <h3 id={titleId} className="text-sm font-semibold text-zinc-950 dark:text-white">
          {title}
        </h3>
        <p id={summaryId} className="text-xs text-zinc-600 tabular-nums dark:text-zinc-400">
          {summary}
        </p>
      </figcaption>
      {/* Every chart has its legend row, single-line ones too, so the four plots line up. */}
      <ul aria-hidden="true" className="flex h-4 gap-3 text-xs text-zinc-600 dark:text-zinc-400">
        {lines.map((line) => (
          <li key={line.key} className="flex items-center gap-1.5">
            <span className="inline-block h-0.5 w-3 rounded" style={{ backgroundColor: line.color }} />
            {line.label}
          </li>
        ))}
      </ul>
      <div className="text-zinc-500 dark:text-zinc-400" style={{ height: CHART_HEIGHT }}>
        {placeholder !== undefined ? (
          <div className="flex h-full items-center justify-center rounded-lg border border-dashed border-zinc-300 px-4 text-center text-xs text-zinc-600 dark:border-zinc-700 dark:text-zinc-400">
            {placeholder}
          </div>
        ) : (
          <AreaChart
            responsive
            style={{ width: "100%", height: CHART_HEIGHT }}
            data={rows}
            margin={{ top: 4, right: 4, bottom: 0, left: 0 }}
            title={title}
          >
            <CartesianGrid stroke="currentColor" strokeOpacity={0.15} vertical={false} />
            <XAxis
              dataKey="t"
              type="number"
              scale="time"
              domain={domain}
              allowDataOverflow
              tickFormatter={formatClock}
              tick={{ fill: "currentColor", fontSize: 11 }}
              stroke="currentColor"
              strokeOpacity={0.3}
              minTickGap={40}
            />
            <YAxis
              width={84}
              tickFormatter={(value: number) => formatDatasourceValue(value, units)}
              tick={{ fill: "currentColor", fontSize: 11 }}
              stroke="currentColor"
              strokeOpacity={0.3}
              tickCount={4}
              domain={[0, "auto"]}
            />
            <Tooltip content={(props) => <ChartTooltip {...props} lines={lines} units={units} />} isAnimationActive={false} />
            {lines.map((line) => (
              <Area
                key={line.key}
                dataKey={line.key}
                name={line.label}
                type="monotone"
                stroke={line.color}
                strokeWidth={1.75}
                fill={line.color}
                fillOpacity={0.12}
                isAnimationActive={false}
                connectNulls={false}
                // A few samples on a wide range would be a hairline at the right edge: mark each one.
                dot={rows.length < 20 ? { r: 2, fill: line.color, strokeWidth: 0 } : false}
              />
            ))}
          </AreaChart>
        )}
      </div>
    </figure>
  );
}

function ChartTooltip({ active, payload, label, lines, units }: TooltipContentProps & { lines: ChartLine[]; units: string }) {
  if (!active || payload === undefined || payload.length === 0) return null;
  return (
    <div className="rounded-md border border-zinc-200 bg-white px-2.5 py-1.5 text-xs shadow-md dark:border-zinc-700 dark:bg-zinc-900">
      <p className="font-medium text-zinc-900 dark:text-zinc-100">{typeof label === "number" ? formatClockSeconds(label) : null}</p>
      {lines.map((line) => {
        const entry = payload.find((item) => item.dataKey === line.key);
        return (
          <p key={line.key} className="flex items-center gap-1.5 text-zinc-700 tabular-nums dark:text-zinc-300">
            <span aria-hidden="true" className="inline-block size-2 rounded-full" style={{ backgroundColor: line.color }} />
            {line.label}: {formatDatasourceValue(typeof entry?.value === "number" ? entry.value : null, units)}
          </p>
        );
      })}
    </div>
  );
}
