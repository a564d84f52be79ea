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
