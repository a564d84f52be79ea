// Row group 3: Volume.snapshot and Volume.clone of a 10 GiB volume with 1 GiB written, then with 5 GiB
// more: through the plugin (one exec per call) and as the library call alone. Both should cost the same
// whatever the data size (they only freeze the top layer). Baselines: for the plugin, `qemu-img create -b`
// (an external snapshot: process start plus metadata, the same kind of work); for the library, the same
// call on an empty 10 GiB volume, so the ratio shows any dependence on the data size.
// The SR is on disk (os.tmpdir()), not tmpfs: the fsyncs of the metadata are part of the cost.
import { truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cloneVolume, snapshotVolume } from "../../server/plugins/filesr/index.ts";
import { srUri } from "../../server/plugins/uris.ts";
import { formatSize, interleave, spread, summarise, timeSeconds, type Samples } from "../measure.ts";
import { endedChildrenCpuSeconds, runCommand } from "../processes.ts";
import type { Row } from "../table.ts";
import type { Scratch } from "../workspace.ts";
import { writeVolume } from "./content.ts";
import { DBG, VOLUME_PLUGIN, pluginClient } from "./plugins.ts";
import type { StorageSizes } from "./sizes.ts";
import { createBenchSr, createBenchVolume } from "./sr.ts";

const TARGET_MS = 1000;
const OPERATIONS = ["snapshot", "clone"] as const;
const CONTENDERS = ["plugin snapshot", "plugin clone", "library snapshot", "library clone", "library snapshot, empty", "library clone, empty", "qemu-img"] as const;
type Contender = (typeof CONTENDERS)[number];

export async function benchSnapshot(scratch: Scratch, sizes: StorageSizes): Promise<Row[]> {
  const dir = scratch.disk;
  const sr = await createBenchSr(scratch, dir, "sr");
  const size = sizes.snapshotVolumeBytes;
  const full = await createBenchVolume(sr, "snapshot source", size);
  const empty = await createBenchVolume(sr, "snapshot source, empty", size);
  const base = join(dir, "base.raw");
  writeFileSync(base, "");
  truncateSync(base, size);
  const plugin = pluginClient("volume", VOLUME_PLUGIN);
  const host = process.env.HANGAR_HOST_UUID;
  let overlays = 0;

  const calls: Record<Contender, () => Promise<unknown>> = {
    "plugin snapshot": () => plugin.call("Volume.snapshot", { dbg: DBG, sr: srUri(sr), key: full }),
    "plugin clone": () => plugin.call("Volume.clone", { dbg: DBG, sr: srUri(sr), key: full }),
    "library snapshot": () => snapshotVolume(sr, full, { host }),
    "library clone": () => cloneVolume(sr, full, { host }),
    "library snapshot, empty": () => snapshotVolume(sr, empty, { host }),
    "library clone, empty": () => cloneVolume(sr, empty, { host }),
    "qemu-img": () => runCommand("qemu-img", ["create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", join(dir, `overlay-${overlays++}.qcow2`)]),
  };
  // CPU of the exec'd process (plugin, qemu-img): the call's own cost, apart from waiting for a busy machine.
  const cpu = new Map<Contender, number[]>();
  const measure = async (contender: Contender) => {
    const before = endedChildrenCpuSeconds();
    const milliseconds = (await timeSeconds(calls[contender])) * 1000;
    cpu.get(contender)!.push((endedChildrenCpuSeconds() - before) * 1000);
    return milliseconds;
  };

  const rows: Row[] = [];
  let written = 0;
  for (const more of [sizes.snapshotFirstBytes, sizes.snapshotMoreBytes]) {
    process.stderr.write(`  writing ${formatSize(more)} into the ${formatSize(size)} volume...\n`);
    await writeVolume(sr, full, [{ offset: written, length: more }]);
    written += more;
    for (const contender of CONTENDERS) cpu.set(contender, []);
    const times = await interleave(sizes.runs, CONTENDERS, measure);
    const cpuNote = (contender: Contender) => `${summarise(cpu.get(contender)!).median.toFixed(0)} ms`;
    const what = `${formatSize(size)} volume, ${formatSize(written)} written`;
    for (const operation of OPERATIONS) {
      rows.push({
        ...timeRow(`Volume.${operation}, ${what}, plugin exec`, times[`plugin ${operation}`], times["qemu-img"], "qemu-img create -b (overlay)"),
        note: `runs ${spread(times[`plugin ${operation}`])} vs ${spread(times["qemu-img"])} ms; process CPU ${cpuNote(`plugin ${operation}`)} vs ${cpuNote("qemu-img")}`,
      });
      rows.push(timeRow(`Volume.${operation}, ${what}, library`, times[`library ${operation}`], times[`library ${operation}, empty`], "same call, empty volume"));
    }
  }
  return rows;
}

function timeRow(measure: string, ours: Samples, baseline: Samples, what: string): Row {
  return {
    measure,
    ours: `${ours.median.toFixed(0)} ms`,
    baseline: `${baseline.median.toFixed(0)} ms ${what}`,
    ratio: ours.median / baseline.median,
    target: `< ${TARGET_MS} ms`,
    met: ours.median < TARGET_MS,
    note: `runs ${spread(ours)} vs ${spread(baseline)} ms`,
  };
}
