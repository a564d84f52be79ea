// Datasource values for people, by the unit the sampler reports (B, B/s, requests/s, ms).
import { formatBytes, formatRate } from "../../lib/format.ts";

function compact(value: number): string {
  if (value === 0) return "0";
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en");
  return value.toFixed(Math.abs(value) >= 10 ? 1 : 2).replace(/\.?0+$/, "");
}

/** "12.4 GiB", "85.2 MB/s", "120 IOPS", "1.25 ms"; "—" for no value. */
export function formatDatasourceValue(value: number | null | undefined, units: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "—";
  switch (units) {
    case "B":
      return formatBytes(value);
    case "B/s":
      return formatRate(value);
    case "requests/s":
      return `${compact(value)} IOPS`;
    case "ms":
      return `${compact(value)} ms`;
    default:
      return `${compact(value)} ${units}`;
  }
}

/** Axis labels are short: "14:05". */
export function formatClock(ms: number): string {
  return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

/** Tooltips say the second too: "14:05:30". */
export function formatClockSeconds(ms: number): string {
  return new Date(ms).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}
