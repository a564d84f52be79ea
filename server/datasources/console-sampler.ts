// The one sampler of the console process. Kept on globalThis: Next.js may load this module more than once
// (route bundles, hot reload in development), and two samplers would each run a timer and split the history.
import { metricsDir } from "../config.ts";
import { DatasourceSampler } from "./sampler.ts";

const KEY = Symbol.for("hangar.console.datasourceSampler");

type WithSampler = typeof globalThis & { [KEY]?: { dir: string; sampler: DatasourceSampler } };

/**
 * The console's sampler, over the metrics dir (HANGAR_METRICS_DIR, else `<data dir>/metrics`). A changed
 * metrics dir (tests start a host per test) gets a fresh sampler; a console's environment never changes.
 */
export function consoleSampler(): DatasourceSampler {
  const holder = globalThis as WithSampler;
  const dir = metricsDir();
  if (holder[KEY]?.dir !== dir) {
    holder[KEY]?.sampler.stop();
    holder[KEY] = { dir, sampler: new DatasourceSampler({ metricsDir: dir }) };
  }
  return holder[KEY].sampler;
}
