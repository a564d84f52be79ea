// Row group 3: VDI.get_all_records with an SR of 10,000 volumes (big-sr.ts), over JSON-RPC and XML-RPC.
// Records come from one SR.ls per SR, never a call per volume. Baseline: that SR.ls exec through the
// plugin client, the floor of any listing.
import { z } from "zod";
import { srUri } from "../../server/plugins/uris.ts";
import { summarise, timeSeconds } from "../measure.ts";
import type { Row } from "../table.ts";
import { DBG, pluginClient, VOLUME_PLUGIN } from "../storage/plugins.ts";
import { createBigSr } from "./big-sr.ts";
import { type BenchService, formatLatency, measureBatch, percentile, prepareCall, WIRES, type Wire } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

const TARGET_MS = 300;

export async function benchVdiListing(service: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const { client } = service;
  const { path } = await createBigSr(service, "big", sizes.volumes);

  // The first listing also records a locator and an "add" event per volume, once.
  const first = (await timeSeconds(() => client.call(z.record(z.string(), z.unknown()), "VDI.get_all_records"))) * 1000;
  const listed = Object.keys(await client.call(z.record(z.string(), z.unknown()), "VDI.get_all_records")).length;
  if (listed < sizes.volumes) throw new Error(`VDI.get_all_records listed ${listed} VDIs, expected at least ${sizes.volumes}`);

  const plugin = pluginClient("volume", VOLUME_PLUGIN);
  const ls = () => plugin.call("SR.ls", { dbg: DBG, sr: srUri(path) });
  const lists = Object.fromEntries(WIRES.map((wire) => [wire, prepareCall(service.url, wire, "VDI.get_all_records", [client.session])])) as Record<Wire, () => Promise<void>>;
  const samples = Object.fromEntries(WIRES.map((wire) => [wire, { ms: [] as number[], cpuMs: 0 }])) as Record<Wire, { ms: number[]; cpuMs: number }>;
  const lsMs: number[] = [];
  await ls();
  for (let run = 0; run < sizes.listings; run++) {
    for (const wire of WIRES) {
      const batch = await measureBatch(service, lists[wire], 1, 1);
      samples[wire].ms.push(...batch.ms);
      samples[wire].cpuMs += batch.cpuMs;
    }
    lsMs.push((await timeSeconds(ls)) * 1000);
  }
  const floor = summarise(lsMs).median;
  return WIRES.map((wire) => {
    const p50 = percentile(samples[wire].ms, 50);
    return {
      measure: `VDI.get_all_records, an SR of ${sizes.volumes} volumes (+ the default SR), ${wire}`,
      ours: formatLatency(samples[wire].ms),
      baseline: `${floor.toFixed(0)} ms SR.ls exec of the SR`,
      ratio: p50 / floor,
      target: `< ${TARGET_MS} ms`,
      met: p50 < TARGET_MS,
      note: `${samples[wire].ms.length} calls; service CPU ${(samples[wire].cpuMs / samples[wire].ms.length).toFixed(0)} ms/call; first listing (records the locators) ${first.toFixed(0)} ms`,
    };
  });
}
