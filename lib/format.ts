/** "1 plugin", "2 plugins". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** A plugin may leave a descriptive field empty; say so instead of showing a blank. */
export function stated(value: string): string {
  return value.trim() === "" ? "Not stated" : value;
}

const BINARY_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** Bytes for people, in binary units: "512 B", "12.4 GiB", "3 TiB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return "—";
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < BINARY_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const digits = unit === 0 || value >= 100 || Number.isInteger(value) ? 0 : 1;
  return `${bytes < 0 ? "-" : ""}${value.toFixed(digits)} ${BINARY_UNITS[unit]}`;
}

/** A transfer rate as disks and networks are quoted, in decimal units: "85.2 MB/s". */
export function formatRate(bytesPerSecond: number): string {
  if (!Number.isFinite(bytesPerSecond) || bytesPerSecond < 0) return "—";
  const units = ["B/s", "kB/s", "MB/s", "GB/s"];
  let value = bytesPerSecond;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 || value >= 100 ? 0 : 1)} ${units[unit]}`;
}

/** A duration for people: "45 s", "3 min", "1 h 5 min", "2 d 3 h". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  const s = Math.round(seconds);
  if (s < 60) return `${s} s`;
  const minutes = Math.round(s / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
  const days = Math.floor(hours / 24);
  return hours % 24 === 0 ? `${days} d` : `${days} d ${hours % 24} h`;
}

/** "3 min left"; "less than a minute left" rather than a jumpy count of seconds. */
export function formatTimeLeft(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "";
  return seconds < 60 ? "less than a minute left" : `${formatDuration(seconds)} left`;
}

/** "just now", "2 min ago", "3 h ago", then the date. */
export function formatRelativeTime(date: Date | string | number, now: number = Date.now()): string {
  const at = new Date(date).getTime();
  if (!Number.isFinite(at)) return "—";
  const seconds = Math.max(0, (now - at) / 1000);
  if (seconds < 45) return "just now";
  if (seconds < 48 * 3600) return `${formatDuration(seconds)} ago`;
  return new Date(at).toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" });
}

/** 0.423 → "42%"; one decimal under 10 % so slow progress still moves. */
export function formatPercent(fraction: number): string {
  if (!Number.isFinite(fraction)) return "—";
  const percent = fraction * 100;
  return `${percent < 10 && percent > 0 ? percent.toFixed(1) : Math.round(percent)}%`;
}
