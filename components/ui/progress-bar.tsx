import { cn } from "./cn.ts";

const tones = {
  default: "bg-sky-600 dark:bg-sky-500",
  success: "bg-emerald-600 dark:bg-emerald-500",
  warning: "bg-amber-500",
  danger: "bg-red-600 dark:bg-red-500",
} as const;

export interface ProgressBarProps {
  /** 0..1; null while the amount of work is unknown (indeterminate). */
  value: number | null;
  /** What progresses, e.g. "Copy of disk0": the bar's accessible name. */
  label: string;
  tone?: keyof typeof tones;
  className?: string;
}

export function ProgressBar({ value, label, tone = "default", className }: ProgressBarProps) {
  const percent = value === null ? null : Math.round(Math.min(1, Math.max(0, value)) * 1000) / 10;
  return (
    <div
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={percent ?? undefined}
      aria-valuetext={percent === null ? "In progress" : `${percent}%`}
      className={cn("h-2 w-full overflow-hidden rounded-full bg-zinc-200 dark:bg-zinc-800", className)}
    >
      <div
        className={cn("h-full rounded-full transition-[width] duration-500 ease-out", tones[tone], percent === null && "w-1/3 animate-pulse")}
        style={percent === null ? undefined : { width: `${percent}%` }}
      />
    </div>
  );
}
