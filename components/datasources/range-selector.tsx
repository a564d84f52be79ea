"use client";

import { useId } from "react";
import { cn } from "@/components/ui/cn.ts";

export const RANGES = [
  { seconds: 300, label: "5 min", long: "Last 5 minutes" },
  { seconds: 900, label: "15 min", long: "Last 15 minutes" },
  { seconds: 3600, label: "1 h", long: "Last hour" },
] as const;

export type RangeSeconds = (typeof RANGES)[number]["seconds"];

/** Segmented buttons that are a labelled radio group underneath: arrow keys move between ranges. */
export function RangeSelector({ value, onChange }: { value: RangeSeconds; onChange: (range: RangeSeconds) => void }) {
  const name = useId();
  return (
    <fieldset className="flex items-center gap-2">
      <legend className="sr-only">Time range</legend>
      <span aria-hidden="true" className="text-xs font-medium text-zinc-600 dark:text-zinc-400">
        Range
      </span>
      <div className="inline-flex rounded-md bg-zinc-100 p-0.5 ring-1 ring-zinc-200 ring-inset dark:bg-zinc-900 dark:ring-zinc-800">
        {RANGES.map((range) => (
          <label
            key={range.seconds}
            className={cn(
              "relative cursor-pointer rounded px-2.5 py-1 text-xs font-medium transition-colors has-[:focus-visible]:outline-2 has-[:focus-visible]:outline-sky-600",
              value === range.seconds
                ? "bg-white text-zinc-950 shadow-sm dark:bg-zinc-700 dark:text-white"
                : "text-zinc-600 hover:text-zinc-900 dark:text-zinc-400 dark:hover:text-zinc-100",
            )}
          >
            <input
              type="radio"
              name={name}
              value={range.seconds}
              checked={value === range.seconds}
              onChange={() => onChange(range.seconds)}
              aria-label={range.long}
              className="sr-only"
            />
            {range.label}
          </label>
        ))}
      </div>
    </fieldset>
  );
}
