// How long the event loop's thread works without a break while something runs: its own CPU time between ticks
// 2 ms apart, so what other processes on the machine do (a busy test run) does not count.

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** A full collection now: the garbage a test made beforehand (bodies it built) is then not collected inside its measure. */
export function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

export async function longestStep<T>(work: () => Promise<T>): Promise<{ value: T; longestMs: number }> {
  let longestMs = 0;
  let last = process.threadCpuUsage();
  const measure = () => {
    const now = process.threadCpuUsage();
    longestMs = Math.max(longestMs, (now.user - last.user + now.system - last.system) / 1000);
    last = now;
  };
  const ticks = setInterval(measure, 2);
  try {
    const value = await work();
    measure();
    return { value, longestMs };
  } finally {
    clearInterval(ticks);
  }
}
