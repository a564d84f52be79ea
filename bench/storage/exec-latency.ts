// Row group 5: latency of plugin calls through the real exec transport (spawn `<dir>/<Method> --json`,
// params on stdin, parse stdout): Plugin.query, SR.ls of an SR holding 1,000 volumes, and Volume.snapshot /
// Volume.clone (on an SR on disk: their fsyncs are part of the cost). Baseline: the same transport running a
// trivial script that starts the same Node (`node -e`) and prints `null`, i.e. the floor any Node plugin
// pays per call. Targets are ratios to that floor.
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createVolume } from "../../server/plugins/filesr/index.ts";
import { srUri } from "../../server/plugins/uris.ts";
import { createExecTransport } from "../../server/storage/exec-transport.ts";
import { interleave, spread, summarise, timeSeconds, type Samples } from "../measure.ts";
import { endedChildrenCpuSeconds } from "../processes.ts";
import type { Row } from "../table.ts";
import type { Scratch } from "../workspace.ts";
import { DBG, VOLUME_PLUGIN, pluginClient } from "./plugins.ts";
import type { StorageSizes } from "./sizes.ts";
import { createBenchSr } from "./sr.ts";

const CONTENDERS = ["trivial", "Plugin.query", "SR.ls", "Volume.snapshot", "Volume.clone"] as const;
type Contender = (typeof CONTENDERS)[number];

/** A plugin directory whose only script is `Plugin.Query`: start Node, print null, exit. */
function trivialPlugin(dir: string): string {
  const plugin = join(dir, "trivial");
  mkdirSync(plugin);
  const script = join(plugin, "Plugin.Query");
  writeFileSync(script, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} -e 'process.stdout.write("null")'\n`);
  chmodSync(script, 0o755);
  return plugin;
}

export async function benchExecLatency(scratch: Scratch, sizes: StorageSizes): Promise<Row[]> {
  const dir = scratch.fast;
  const sr = await createBenchSr(scratch, dir, "sr");
  const started = Date.now();
  for (let i = 0; i < sizes.volumeCount; i++) await createVolume(sr, { name: `volume ${i}`, description: "bench", size: 1024 * 1024 * 1024 });
  process.stderr.write(`  created ${sizes.volumeCount} volumes in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

  const diskSr = await createBenchSr(scratch, scratch.disk, "sr");
  const source = (await createVolume(diskSr, { name: "snapshot source", description: "bench", size: 10 * 1024 ** 3 })).key;

  const plugin = pluginClient("volume", VOLUME_PLUGIN);
  const trivial = createExecTransport(trivialPlugin(dir), "trivial");
  let listed = -1;
  const calls: Record<Contender, () => Promise<unknown>> = {
    trivial: () => trivial.invoke("Plugin.query", JSON.stringify({ dbg: DBG })),
    "Plugin.query": () => plugin.call("Plugin.query", { dbg: DBG }),
    "SR.ls": async () => (listed = (await plugin.call("SR.ls", { dbg: DBG, sr: srUri(sr) })).length),
    "Volume.snapshot": () => plugin.call("Volume.snapshot", { dbg: DBG, sr: srUri(diskSr), key: source }),
    "Volume.clone": () => plugin.call("Volume.clone", { dbg: DBG, sr: srUri(diskSr), key: source }),
  };
  for (const contender of CONTENDERS) await calls[contender](); // warm-up: page cache, compile cache
  if (listed !== sizes.volumeCount) throw new Error(`SR.ls listed ${listed} volumes, expected ${sizes.volumeCount}`);
  // The CPU the exec'd process used tells the call's own cost apart from waiting for a busy machine.
  const cpu = new Map<Contender, number[]>(CONTENDERS.map((c) => [c, []]));
  const times = await interleave(sizes.execRuns, CONTENDERS, async (contender) => {
    const before = endedChildrenCpuSeconds();
    const milliseconds = (await timeSeconds(calls[contender])) * 1000;
    cpu.get(contender)!.push((endedChildrenCpuSeconds() - before) * 1000);
    return milliseconds;
  });
  const measured = (contender: Contender): Measured => ({ wall: times[contender], cpu: summarise(cpu.get(contender)!) });
  return [
    latencyRow("Plugin.query latency, volume plugin, exec", measured("Plugin.query"), measured("trivial"), 1.5),
    latencyRow(`SR.ls latency, ${sizes.volumeCount} volumes, exec`, measured("SR.ls"), measured("trivial"), 2),
    latencyRow("Volume.snapshot latency, 10 GiB volume, SR on disk, exec", measured("Volume.snapshot"), measured("trivial"), 2),
    latencyRow("Volume.clone latency, 10 GiB volume, SR on disk, exec", measured("Volume.clone"), measured("trivial"), 2),
  ];
}

interface Measured {
  wall: Samples;
  /** CPU milliseconds of the exec'd process (10 ms resolution). */
  cpu: Samples;
}

function latencyRow(measure: string, ours: Measured, baseline: Measured, maxRatio: number): Row {
  const ratio = ours.wall.median / baseline.wall.median;
  return {
    measure,
    ours: `${ours.wall.median.toFixed(0)} ms`,
    baseline: `${baseline.wall.median.toFixed(0)} ms trivial exec (sh → node -e)`,
    ratio,
    target: `≤ ${maxRatio}×`,
    met: ratio <= maxRatio,
    note: `${ours.wall.values.length} calls ${spread(ours.wall)} vs ${spread(baseline.wall)} ms; plugin process CPU ${ours.cpu.median.toFixed(0)} vs ${baseline.cpu.median.toFixed(0)} ms`,
  };
}
