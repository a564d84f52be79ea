// Row group 2: SR.get_all_records with 10 SRs (file SRs made through SR.create, destroyed after). A record's
// space comes from SR.stat, cached 2 s: a cold call (the cache expired) runs the 10 SR.stat plugin execs in
// parallel, a warm one answers from the cache. Baseline: one SR.stat exec through the plugin client.
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { srUri } from "../../server/plugins/uris.ts";
import { summarise, timeSeconds } from "../measure.ts";
import type { Row } from "../table.ts";
import { DBG, pluginClient, VOLUME_PLUGIN } from "../storage/plugins.ts";
import { type BenchService, formatLatency, measureBatch, percentile, pool, prepareCall } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

/** Just past the toolstack's SR.stat cache time (srs.ts). */
const STAT_CACHE_EXPIRED_MS = 2100;

export async function benchSrListing(service: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const { client } = service;
  const [host] = await client.call(z.array(z.string()), "host.get_all");
  const existing = (await client.call(z.array(z.string()), "SR.get_all")).length;
  const made: Array<{ ref: string; path: string }> = [];
  try {
    for (let i = existing; i < sizes.srs; i++) {
      const path = join(service.dataDir, "bench-srs", `sr-${i}`);
      made.push({ ref: await client.call(z.string(), "SR.create", host, { path }, "0", `bench SR ${i}`, "", "file", "user", false, {}), path });
    }
    return await measure(service, sizes, made[0]!.path);
  } finally {
    // The later rows list every SR: they get the one SR they started with.
    for (const { ref } of made) await client.call(z.unknown(), "SR.destroy", ref);
  }
}

async function measure(service: BenchService, sizes: ToolstackSizes, srPath: string): Promise<Row[]> {
  const { client } = service;
  const count = (await client.call(z.array(z.string()), "SR.get_all")).length;
  const list = prepareCall(service.url, "JSON-RPC", "SR.get_all_records", [client.session]);
  const plugin = pluginClient("volume", VOLUME_PLUGIN);
  const stat = () => plugin.call("SR.stat", { dbg: DBG, sr: srUri(srPath) });
  await stat(); // warm-up: page cache, compile cache

  const cold: number[] = [];
  const statMs: number[] = [];
  let cpuMs = 0;
  let pluginCpuMs = 0;
  for (let run = 0; run < sizes.listings; run++) {
    await sleep(STAT_CACHE_EXPIRED_MS);
    const batch = await measureBatch(service, list, 1, 1);
    cold.push(...batch.ms);
    cpuMs += batch.cpuMs;
    pluginCpuMs += batch.pluginCpuMs;
    statMs.push((await timeSeconds(stat)) * 1000);
  }
  const warm = pool([await measureBatch(service, list, 1, sizes.callsAlone)]);
  const statMedian = summarise(statMs).median;
  return [
    {
      measure: `SR.get_all_records, ${count} SRs, cache expired (${count} SR.stat in parallel), JSON-RPC`,
      ours: formatLatency(cold),
      baseline: `${statMedian.toFixed(0)} ms one SR.stat exec`,
      ratio: percentile(cold, 50) / statMedian,
      target: "",
      met: null,
      note: `${cold.length} calls; service CPU ${(cpuMs / cold.length).toFixed(1)} ms/call, its plugin execs ${(pluginCpuMs / cold.length).toFixed(0)} ms/call`,
    },
    {
      measure: `SR.get_all_records, ${count} SRs, SR.stat cached (calls within 2 s), JSON-RPC`,
      ours: formatLatency(warm.ms),
      baseline: `${statMedian.toFixed(0)} ms one SR.stat exec`,
      ratio: percentile(warm.ms, 50) / statMedian,
      target: "",
      met: null,
      note: `${warm.calls} calls, ${warm.callsPerSecond.toFixed(0)}/s; service CPU ${warm.cpuMsPerCall.toFixed(2)} ms/call`,
    },
  ];
}
