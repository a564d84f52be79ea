// A task's progress as a terminal shows it: the rate from how the progress moved over the last few seconds
// (a task reports only its fraction done), the time left from that rate, and a bar or a plain line.

export interface ProgressEstimate {
  fraction: number;
  /** Fraction per second; null until the progress has moved. */
  rate: number | null;
  /** Seconds left at that rate; null without a rate. */
  eta: number | null;
}

interface Sample {
  at: number;
  fraction: number;
}

export class ProgressMeter {
  readonly #windowMs: number;
  #samples: Sample[] = [];

  /** The rate is the slope over the last `windowMs` (recent speed, steadier than the last step). */
  constructor(windowMs = 10_000) {
    this.#windowMs = windowMs;
  }

  sample(fraction: number, at = Date.now()): ProgressEstimate {
    this.#samples.push({ at, fraction });
    // The base of the slope: the newest sample at least a window old (else the oldest there is).
    const base = this.#samples.findLastIndex((s) => s.at <= at - this.#windowMs);
    this.#samples = this.#samples.slice(Math.max(0, base));
    const first = this.#samples[0]!;
    const seconds = (at - first.at) / 1000;
    const rate = seconds > 0 && fraction > first.fraction ? (fraction - first.fraction) / seconds : null;
    return { fraction, rate, eta: rate === null ? null : Math.max(0, 1 - fraction) / rate };
  }
}

/** 75, 3725 → "1:15", "1:02:05". */
export function formatDuration(seconds: number): string {
  const whole = Math.round(seconds);
  const [h, m, s] = [Math.floor(whole / 3600), Math.floor((whole % 3600) / 60), whole % 60];
  const two = (n: number) => String(n).padStart(2, "0");
  return h > 0 ? `${h}:${two(m)}:${two(s)}` : `${m}:${two(s)}`;
}

function details(estimate: ProgressEstimate): string {
  if (estimate.rate === null || estimate.eta === null) return "";
  return `${(estimate.rate * 100).toFixed(1)} %/s, ETA ${formatDuration(estimate.eta)}`;
}

/** "[##########----------]  50%  2.5 %/s, ETA 0:20" for a terminal line redrawn in place. */
export function progressBar(estimate: ProgressEstimate, width = 30): string {
  const done = Math.round(Math.min(1, Math.max(0, estimate.fraction)) * width);
  const percent = `${Math.floor(estimate.fraction * 100)}%`.padStart(4);
  return `[${"#".repeat(done)}${"-".repeat(width - done)}] ${percent}  ${details(estimate)}`.trimEnd();
}

/** "progress 50% (2.5 %/s, ETA 0:20)" for logs and pipes. */
export function progressLine(estimate: ProgressEstimate): string {
  const more = details(estimate);
  return `progress ${Math.floor(estimate.fraction * 100)}%${more === "" ? "" : ` (${more})`}`;
}

// Transfers (vm-import, vm-export): bytes moved, the byte rate, and the time left from whichever is known —
// the total size, or else the task's own fraction.

/** 1610612736 → "1.5 GiB"; 10737418240 → "10.0 GiB" (steady width while a figure moves), or "10 GiB" with `trim`. */
export function formatSize(bytes: number, trim = false): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 ? value : trim ? Number(value.toFixed(1)) : value.toFixed(1)} ${units[unit]}`;
}

export interface TransferEstimate {
  bytes: number;
  /** Bytes in all, when known (a file's size, a Content-Length). */
  total: number | null;
  /** Bytes per second; null until bytes have moved. */
  rate: number | null;
  /** Fraction done: bytes of the total, else the task's. */
  fraction: number | null;
  /** The task's own progress, when followed. */
  task: number | null;
  /** Seconds left; null when neither the total nor the task's rate tells. */
  eta: number | null;
}

export class TransferMeter {
  // Byte counts are fed as "fractions": the slope is then bytes per second.
  readonly #bytes: ProgressMeter;
  readonly #task: ProgressMeter;

  constructor(windowMs = 10_000) {
    this.#bytes = new ProgressMeter(windowMs);
    this.#task = new ProgressMeter(windowMs);
  }

  sample(bytes: number, total: number | null, task: number | null, at = Date.now()): TransferEstimate {
    const { rate } = this.#bytes.sample(bytes, at);
    if (total !== null && total > 0) {
      const eta = rate === null ? null : Math.max(0, total - bytes) / rate;
      return { bytes, total, rate, fraction: Math.min(1, bytes / total), task, eta };
    }
    const byTask = task === null ? null : this.#task.sample(task, at);
    // Below 1% a task's slope says little yet.
    return { bytes, total: null, rate, fraction: task, task, eta: task !== null && task >= 0.01 ? (byTask?.eta ?? null) : null };
  }
}

function transferDetails(estimate: TransferEstimate): string[] {
  const parts = [estimate.total === null ? formatSize(estimate.bytes) : `${formatSize(estimate.bytes)} of ${formatSize(estimate.total)}`];
  if (estimate.rate !== null) parts.push(`${formatSize(estimate.rate)}/s`);
  if (estimate.eta !== null) parts.push(`ETA ${formatDuration(estimate.eta)}`);
  // The task's fraction is worth its own mention only beside a byte fraction (an import's disks being written).
  if (estimate.task !== null && estimate.total !== null) parts.push(`task ${Math.floor(estimate.task * 100)}%`);
  return parts;
}

/** "[#######-------]  50%  1.0 GiB of 2.0 GiB  48.0 MiB/s  ETA 0:21  task 45%" for a line redrawn in place. */
export function transferBar(estimate: TransferEstimate, width = 30): string {
  const details = transferDetails(estimate).join("  ");
  if (estimate.fraction === null) return details;
  const done = Math.round(Math.min(1, Math.max(0, estimate.fraction)) * width);
  const percent = `${Math.floor(estimate.fraction * 100)}%`.padStart(4);
  return `[${"#".repeat(done)}${"-".repeat(width - done)}] ${percent}  ${details}`;
}

/** "sent 50%: 1.0 GiB of 2.0 GiB, 48.0 MiB/s, ETA 0:21, task 45%" for logs and pipes. */
export function transferLine(verb: string, estimate: TransferEstimate): string {
  const percent = estimate.fraction === null ? "" : ` ${Math.floor(estimate.fraction * 100)}%`;
  return `${verb}${percent}: ${transferDetails(estimate).join(", ")}`;
}
