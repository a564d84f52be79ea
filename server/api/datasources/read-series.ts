// datasources.series: the SR checked with the user's session (it exists, it is attached, the user may see
// it), then registered with the console's sampler and answered from its memory. See
// server/datasources/sampler.ts for where the sampler's SR list comes from.
import "server-only";

import { z } from "zod";
import { consoleSampler } from "../../datasources/console-sampler.ts";
import { SAMPLE_INTERVAL_MS, type DatasourceSampler, type WatchedSr } from "../../datasources/sampler.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { accessSr, callPlugin, CONSOLE_DBG, hostPlugins, type PoolHost, poolHosts, type SrAccess } from "../storage-access.ts";
import { hostLabel } from "../../xenapi/hosts.ts";
import type { TSeriesResponse, TSeriesSchema } from "./schema.ts";

/** How often a series request also registers every attached SR the toolstack lists. */
const DISCOVERY_INTERVAL_MS = 60_000;
let lastDiscovery = 0;

/** A datasource file read from the host that writes it (GET <host>/metrics/<uid>), in the user's session. */
function remoteDatasource(xapi: XenApiClient, host: PoolHost): (uid: string) => Promise<Buffer> {
  return async (uid) => {
    const url = `${host.url}/metrics/${encodeURIComponent(uid)}`;
    let response: Response;
    try {
      response = await fetch(url, { headers: { cookie: `session_id=${xapi.session}` }, signal: AbortSignal.timeout(SAMPLE_INTERVAL_MS) });
    } catch (error) {
      throw new Error(`the host ${hostLabel(host)} did not answer for its datasource file ${uid}: ${(error as { cause?: Error }).cause?.message ?? (error as Error).message}`);
    }
    if (!response.ok) throw new Error(`the host ${hostLabel(host)} answered HTTP ${response.status} for its datasource file ${uid}: ${(await response.text()).trim()}`);
    return Buffer.from(await response.arrayBuffer());
  };
}

/** What the sampler needs of an SR: its plugin for SR.stat, and its host when the files are written there. */
function watchedSr(xapi: XenApiClient, sr: Pick<SrAccess, "name" | "uri" | "plugin"> & { host: PoolHost | undefined }): WatchedSr {
  return {
    name: sr.name,
    datasources: async () => (await callPlugin(sr.plugin, "SR.stat", { dbg: CONSOLE_DBG, sr: sr.uri })).datasources,
    ...(sr.host === undefined ? {} : { readDatasource: remoteDatasource(xapi, sr.host) }),
  };
}

export async function readSeries(xapi: XenApiClient, pluginRoot: string, input: TSeriesSchema, sampler: DatasourceSampler = consoleSampler()): Promise<TSeriesResponse> {
  const sr = await accessSr(xapi, pluginRoot, input.srRef);
  await sampler.watch(sr.ref, watchedSr(xapi, { ...sr, host: sr.place.host }));
  if (Date.now() - lastDiscovery > DISCOVERY_INTERVAL_MS) {
    lastDiscovery = Date.now();
    // In the background: the other SRs' history starts filling before anyone opens their page.
    void discoverAttachedSrs(xapi, pluginRoot, sampler).catch(() => undefined);
  }
  const series = sampler.series(sr.ref, input.rangeSeconds) ?? { datasources: [], samples: [], error: null };
  const names = series.datasources.map((source) => source.name);
  return {
    srRef: sr.ref,
    rangeSeconds: input.rangeSeconds,
    intervalSeconds: SAMPLE_INTERVAL_MS / 1000,
    t: series.samples.map((sample) => sample.t),
    values: Object.fromEntries(names.map((name) => [name, series.samples.map((sample) => roundValue(sample.values[name] ?? null))])),
    datasources: series.datasources,
    error: series.error,
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
      const place = hostPlugins(xapi, pluginRoot, host);
      const plugin = (await place.registry()).find(type, "volume");
      if (plugin === undefined) return;
      await sampler.watch(pbd.SR, watchedSr(xapi, { name, uri, plugin, host: place.host }));
    }),
  );
}
