// datasources.series: the SR checked with the user's session (it exists, it is attached, the user may see
// it), then registered with the console's sampler and answered from its memory. See
// server/datasources/sampler.ts for where the sampler's SR list comes from.
import { z } from "zod";
import { metricsDir } from "../../config.ts";
import { consoleSampler } from "../../datasources/console-sampler.ts";
import { SAMPLE_INTERVAL_MS, type DatasourceSampler, type WatchedSr } from "../../datasources/sampler.ts";
import type { XenApiClient } from "../../toolstack/xenapi/client.ts";
import { accessSr, callPlugin, CONSOLE_DBG, hostLabel, hostPlugins, poolHosts, type SrAccess } from "../storage-access.ts";
import type { TSeriesResponse, TSeriesSchema } from "./schema.ts";

/** How often a series request also registers every attached SR the toolstack lists. */
const DISCOVERY_INTERVAL_MS = 60_000;
let lastDiscovery = 0;

function watchedSr(sr: Pick<SrAccess, "name" | "uri" | "plugin">): WatchedSr {
  return {
    name: sr.name,
    datasources: async () => (await callPlugin(sr.plugin, "SR.stat", { dbg: CONSOLE_DBG, sr: sr.uri })).datasources,
  };
}

export async function readSeries(xapi: XenApiClient, pluginRoot: string, input: TSeriesSchema, sampler: DatasourceSampler = consoleSampler()): Promise<TSeriesResponse> {
  const sr = await accessSr(xapi, pluginRoot, input.srRef);
  await sampler.watch(sr.ref, watchedSr(sr));
  if (Date.now() - lastDiscovery > DISCOVERY_INTERVAL_MS) {
    lastDiscovery = Date.now();
    // In the background: the other SRs' history starts filling before anyone opens their page.
    void discoverAttachedSrs(xapi, pluginRoot, sampler).catch(() => undefined);
  }
  const series = sampler.series(sr.ref, input.rangeSeconds) ?? { datasources: [], samples: [], error: null };
  // The sampler reads the datasource files from the console's metrics dir: another host's are there only when
  // it shares that dir (hosts of one machine given one HANGAR_METRICS_DIR).
  const host = sr.place.host;
  const error =
    host !== undefined && series.error !== null && /datasource file is missing|ENOENT/.test(series.error)
      ? `The datasource files of "${sr.name}" are written on its host ${hostLabel(host)}, and the console reads them from its own metrics dir (${metricsDir()}), where they are not: charts of an SR on another host need that host's metrics dir shared with the console.`
      : series.error;
  const names = series.datasources.map((source) => source.name);
  return {
    srRef: sr.ref,
    rangeSeconds: input.rangeSeconds,
    intervalSeconds: SAMPLE_INTERVAL_MS / 1000,
    t: series.samples.map((sample) => sample.t),
    values: Object.fromEntries(names.map((name) => [name, series.samples.map((sample) => roundValue(sample.values[name] ?? null))])),
    datasources: series.datasources,
    error,
  };
}

/** Six significant digits are more than a chart shows, and keep the answer small. */
function roundValue(value: number | null): number | null {
  return value === null || !Number.isFinite(value) ? null : Number(value.toPrecision(6));
}

const ZPbd = z.looseObject({ SR: z.string(), host: z.string().default(""), currently_attached: z.boolean(), other_config: z.record(z.string(), z.string()) });

/** Registers every attached SR the toolstack lists (through the user's session) with the sampler, each through its host's plugin. */
export async function discoverAttachedSrs(xapi: XenApiClient, pluginRoot: string, sampler: DatasourceSampler): Promise<void> {
  const [pbds, hosts] = await Promise.all([xapi.records("PBD", ZPbd), poolHosts(xapi)]);
  // One SR whose plugin is missing (or whose host is offline) does not keep the others out.
  await Promise.allSettled(
    Object.values(pbds).map(async (pbd) => {
      const uri = pbd.other_config["hangar-sr-uri"];
      const host = hosts.get(pbd.host);
      if (!pbd.currently_attached || uri === undefined || host?.live === false) return;
      const [type, name] = await Promise.all([xapi.call(z.string(), "SR.get_type", pbd.SR), xapi.call(z.string(), "SR.get_name_label", pbd.SR)]);
      const plugin = (await hostPlugins(xapi, pluginRoot, host).registry()).find(type, "volume");
      if (plugin === undefined) return;
      await sampler.watch(pbd.SR, watchedSr({ name, uri, plugin }));
    }),
  );
}
