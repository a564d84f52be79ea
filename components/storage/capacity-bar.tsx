import { formatBytes, formatPercent } from "@/lib/format.ts";
import { cn } from "@/components/ui/cn.ts";

/** Amber past this share used, red past the next: a nearly full SR fails writes. */
const WARN_AT = 0.8;
const DANGER_AT = 0.95;

/**
 * Space used of an SR (or of several): a meter with the numbers beside it. `total` 0 means unknown (an SR
 * detached since the toolstack started has never been measured).
 */
export function CapacityBar({ used, total, label, className, size = "sm" }: { used: number; total: number; label: string; className?: string; size?: "sm" | "lg" }) {
  const known = total > 0;
  const fraction = known ? Math.min(1, Math.max(0, used / total)) : 0;
  const text = known ? `${formatBytes(used)} of ${formatBytes(total)} used` : "Space unknown";
  return (
    <div className={cn("flex min-w-0 flex-col gap-1.5", className)}>
      <div
        role="meter"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={known ? Math.round(fraction * 100) : undefined}
        aria-valuetext={known ? `${text} (${formatPercent(fraction)})` : text}
        className={cn("w-full overflow-hidden rounded-full bg-zinc-200 dark:bg-zinc-800", size === "lg" ? "h-3" : "h-2")}
      >
        <div
          className={cn(
            "h-full rounded-full",
            fraction >= DANGER_AT ? "bg-red-600 dark:bg-red-500" : fraction >= WARN_AT ? "bg-amber-500" : "bg-sky-600 dark:bg-sky-500",
          )}
          style={{ width: `${fraction * 100}%` }}
        />
      </div>
      <p className={cn("flex flex-wrap justify-between gap-x-2 tabular-nums text-zinc-600 dark:text-zinc-400", size === "lg" ? "text-sm" : "text-xs")}>
        <span>{known ? `${formatBytes(used)} / ${formatBytes(total)}` : "Space unknown"}</span>
        {known ? <span>{formatPercent(fraction)} used</span> : null}
      </p>
    </div>
  );
}
