// Row group 3: VDI.get_all_records with an SR of 10,000 volumes, over JSON-RPC and XML-RPC. The SR is made
// through SR.create, its volumes straight through the file SR library (10,000 plugin calls would take
// minutes). Records come from one SR.ls per SR, never a call per volume. Baseline: that SR.ls exec through
// the plugin client, the floor of any listing.
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { disconnectSr } from "../../server/plugins/filesr/db.ts";
import { createVolume } from "../../server/plugins/filesr/index.ts";
import { srUri } from "../../server/plugins/uris.ts";
import { summarise, timeSeconds } from "../measure.ts";
import type { Row } from "../table.ts";
import { DBG, pluginClient, VOLUME_PLUGIN } from "../storage/plugins.ts";
import { type BenchService, formatLatency, measureBatch, percentile, prepareCall, WIRES, type Wire } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

const TARGET_MS = 300;

export async function benchVdiListing(service: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const { client } = service;
  const [host] = await client.call(z.array(z.string()), "host.get_all");
  const path = join(service.dataDir, "bench-srs", "big");
  await client.call(z.string(), "SR.create", host, { path }, "0", "big", "", "file", "user", false, {});
  const started = Date.now();
  try {
    for (let i = 0; i < sizes.volumes; i++) await createVolume(path, { name: `volume ${i}`, description: "bench", size: 1024 ** 3 });
  } finally {
    disconnectSr(path);
  }
  process.stderr.write(`  created ${sizes.volumes} volumes in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  // The library's calls never yielded to I/O: let the client see the keep-alive connections the service
  // closed meanwhile, or the next call goes out on one ("other side closed").
  await sleep(100);

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
