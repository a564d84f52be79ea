// The disks suite (`npm run bench -- disks`): PUT /import_raw_vdi and GET /export_raw_vdi against `hangar serve`
// (a process of its own, data dir on tmpfs), each next to Debian's qemu-img doing the same conversion on the same
// tmpfs in the same run: importing VHD, qcow2 and VMDK (streamOptimized) images qemu-img wrote against
// `qemu-img convert` of that image into a fresh raw file; exporting the VDI in each format against
// `qemu-img convert` of the raw disk into that format. The disk is the XVA suite's (4 GiB, 2 GiB of data, half
// text and half random). Wall time and CPU per GiB of disk data (the service, its plugin execs and NBD daemons
// against qemu-img's own), and the service's peak memory at 1 GiB and 4 GiB. qemu-img copies file to file on
// tmpfs; a transfer of ours goes over HTTP into a VDI through the nbd datapath's daemon, which this 2-core
// machine cannot do at that speed whatever our code does. So each row has a peer measured in the same run:
// qemu-img doing the same conversion into (or out of) a volume plugged through the same datapath, with the
// target re-stated against it. See bench/README.md.
import { mkdirSync, rmSync, statSync } from "node:fs";
import { parseNbdUri } from "../server/nbd/uri.ts";
import { destroyVolume } from "../server/plugins/filesr/index.ts";
import { volumeUri } from "../server/plugins/uris.ts";
import { join } from "node:path";
import { z } from "zod";
import { formatSize, GiB, interleave, spread, summarise } from "./measure.ts";
import { endedChildrenCpuSeconds, runCommand } from "./processes.ts";
import { renderTable, type Row, unavailableRow } from "./table.ts";
import { DBG, pluginClient } from "./storage/plugins.ts";
import { createBenchSr, createBenchVolume } from "./storage/sr.ts";
import { openWorkspace, type Scratch } from "./workspace.ts";
import { costNote, RSS_TARGET, rssRow, speed } from "./xva.ts";
import { writeRawDisk } from "./xva/disk.ts";
import { profilingEnv, summariseProfiles } from "./xva/profile.ts";
import { type Cost, currentRss, startXvaService, type XvaService } from "./xva/service.ts";
import { dataBytes, type DiskLayout, xvaSizes } from "./xva/sizes.ts";
import { exportDiskFile, importDiskFile, type Transfer } from "./xva/transfer.ts";

const log = (message: string) => void process.stderr.write(`[bench disks] ${message}\n`);

const TARGET = 0.8;
const FORMATS = [
  // force_size: the VHD's size is the disk's, not its CHS geometry's (which qemu-img would round up).
  { format: "vhd", qemu: "vpc", options: ["-o", "subformat=dynamic,force_size=on"] },
  { format: "qcow2", qemu: "qcow2", options: [] },
  { format: "vmdk", qemu: "vmdk", options: ["-o", "subformat=streamOptimized"] },
] as const;

/** qemu-img convert, timed, with its CPU (rusage of the reaped child). */
async function qemuConvert(args: string[]): Promise<{ seconds: number; cpu: number }> {
  const before = endedChildrenCpuSeconds();
  const { seconds } = await runCommand("qemu-img", ["convert", ...args], { timeoutMs: 15 * 60_000 });
  return { seconds, cpu: endedChildrenCpuSeconds() - before };
}

/** A volume of a file SR of the bench's own, plugged through the nbd datapath as the service plugs a VDI. */
interface PluggedVolume {
  /** Its NBD export, as qemu-img takes it. */
  nbd: string;
  unplug(): Promise<void>;
}

async function plugVolume(sr: string, key: string): Promise<PluggedVolume> {
  const plugin = pluginClient("datapath", "nbd");
  const uri = volumeUri("nbd", sr, key);
  const domain = `bench-${key}`;
  await plugin.call("Datapath.open", { dbg: DBG, uri, persistent: true });
  const { implementations } = await plugin.call("Datapath.attach", { dbg: DBG, uri, domain });
  await plugin.call("Datapath.activate", { dbg: DBG, uri, domain });
  const nbd = implementations.find((implementation) => implementation[0] === "Nbd");
  if (nbd === undefined || nbd[0] !== "Nbd") throw new Error("Datapath.attach offered no Nbd implementation");
  const target = parseNbdUri(nbd[1].uri);
  if (target.kind !== "unix") throw new Error(`expected a unix-socket NBD export, got ${nbd[1].uri}`);
  return {
    nbd: `nbd+unix:///${encodeURIComponent(target.exportName)}?socket=${target.socketPath}`,
    unplug: async () => {
      await plugin.call("Datapath.deactivate", { dbg: DBG, uri, domain });
      await plugin.call("Datapath.detach", { dbg: DBG, uri, domain });
      await plugin.call("Datapath.close", { dbg: DBG, uri });
    },
  };
}

/** qemu-img through a volume plugged for it, plug and unplug counted (as a transfer of ours counts its own). */
async function throughDatapath(sr: string, key: string, args: (nbd: string) => string[]): Promise<{ seconds: number; cpu: number }> {
  const started = performance.now();
  const volume = await plugVolume(sr, key);
  let cpu: number;
  try {
    ({ cpu } = await qemuConvert(args(volume.nbd)));
  } finally {
    await volume.unplug();
  }
  return { seconds: (performance.now() - started) / 1000, cpu };
}

/** The peer of an import: qemu-img converting the image into a new volume through the datapath. */
async function peerImport(sr: string, size: number, qemu: string, image: string): Promise<{ seconds: number; cpu: number }> {
  const key = await createBenchVolume(sr, "peer import", size);
  try {
    return await throughDatapath(sr, key, (nbd) => ["-n", "--target-is-zero", "-f", qemu, "-O", "raw", image, nbd]);
  } finally {
    await destroyVolume(sr, key);
  }
}

async function destroyVdi(service: XvaService, vdi: unknown): Promise<void> {
  await service.client.call(z.unknown(), "VDI.destroy", String(vdi));
}

type Run = () => Promise<{ seconds: number; cpu: number }>;

/**
 * Ours against qemu-img file to file and qemu-img through the datapath, interleaved: two rows (the big disk's),
 * and the transfers for the memory rows.
 */
async function rows(label: string, rounds: number, data: number, ours: () => Promise<Transfer>, baseline: Run, baselineName: string, peer: Run, transfers: Transfer[]): Promise<Row[]> {
  const costs: Cost[] = [];
  const cpu = { baseline: [] as number[], peer: [] as number[] };
  const samples = await interleave(rounds, ["ours", "baseline", "peer"] as const, async (who, round) => {
    if (who === "ours") {
      const transfer = await ours();
      transfers.push(transfer);
      costs.push(transfer.cost);
      log(`${label} round ${round + 1}/${rounds}: ours ${speed(data, transfer.seconds)}`);
      return transfer.seconds;
    }
    const run = await (who === "baseline" ? baseline : peer)();
    cpu[who].push(run.cpu);
    log(`${label} round ${round + 1}/${rounds}: ${who === "baseline" ? baselineName : "qemu-img through the datapath"} ${speed(data, run.seconds)}`);
    return run.seconds;
  });
  const versus = (who: "baseline" | "peer") => samples[who].median / samples.ours.median;
  const toolCpu = (who: "baseline" | "peer") => (summarise(cpu[who]).median / (data / GiB)).toFixed(2);
  return [
    {
      measure: label,
      ours: speed(data, samples.ours.median),
      baseline: `${speed(data, samples.baseline.median)} ${baselineName}`,
      ratio: versus("baseline"),
      target: `≥ ${TARGET}×`,
      met: versus("baseline") >= TARGET,
      note: `${costNote(costs, data)} vs qemu-img ${toolCpu("baseline")} s; spread ${spread(samples.ours, 1)} vs ${spread(samples.baseline, 1)} s`,
    },
    {
      measure: "  (re-stated: the same conversion by qemu-img through the nbd datapath)",
      ours: speed(data, samples.ours.median),
      baseline: `${speed(data, samples.peer.median)} qemu-img ↔ datapath`,
      ratio: versus("peer"),
      target: `≥ ${TARGET}×`,
      met: versus("peer") >= TARGET,
      note: `qemu-img's CPU/GiB ${toolCpu("peer")} s, beside the datapath daemon's; spread ${spread(samples.peer, 1)} s`,
    },
  ];
}

/** Every row of one disk: imports and exports in each format; memory rows from all of them. */
async function diskRows(service: XvaService, scratch: Scratch, sr: string, disk: DiskLayout, rounds: number, idle: number, timed: boolean): Promise<Row[]> {
  const dir = scratch.fast;
  const peerSr = await createBenchSr(scratch, dir, `peer-sr-${disk.size}`);
  const name = `${formatSize(disk.size)} disk, ${formatSize(dataBytes(disk))} data`;
  const data = dataBytes(disk);
  const table: Row[] = [];
  const raw = join(dir, "disk.raw");
  writeRawDisk(raw, disk);
  const imports: Transfer[] = [];
  const exports: Transfer[] = [];
  const kinds: string[] = [];
  const scratchOut = join(dir, "out");
  try {
    for (const { format, qemu, options } of FORMATS) {
      const image = join(dir, `disk.${format}`);
      await qemuConvert(["-f", "raw", "-O", qemu, ...options, raw, image]);
      const label = `import ${format}, ${name}`;
      log(`${label} (${formatSize(statSync(image).size)} file)...`);
      try {
        const made: Transfer[] = [];
        const result = await rows(
          label,
          timed ? rounds : 1,
          data,
          async () => {
            const transfer = await importDiskFile(service, image, format, sr);
            await destroyVdi(service, transfer.result);
            return transfer;
          },
          async () => {
            const run = await qemuConvert(["-f", qemu, "-O", "raw", image, scratchOut]);
            rmSync(scratchOut, { force: true });
            return run;
          },
          "qemu-img convert to raw",
          () => peerImport(peerSr, disk.size, qemu, image),
          made,
        );
        imports.push(...made);
        kinds.push(...made.map(() => format));
        if (timed) table.push(...result);
      } catch (error) {
        table.push({ ...unavailableRow(label, `≥ ${TARGET}×`, (error as Error).message.slice(0, 300)), ours: "FAILED" });
      } finally {
        rmSync(image, { force: true });
      }
    }
    // The VDI the exports read: the raw disk imported (untimed); and the peer's volume, the same bytes.
    const source = await importDiskFile(service, raw, "raw", sr);
    const peerKey = await createBenchVolume(peerSr, "peer export", disk.size);
    await throughDatapath(peerSr, peerKey, (nbd) => ["-n", "--target-is-zero", "-f", "raw", "-O", "raw", raw, nbd]);
    const exportKinds: string[] = [];
    try {
      for (const { format, qemu, options } of FORMATS) {
        const label = `export ${format}, ${name}`;
        log(`${label}...`);
        try {
          const made: Transfer[] = [];
          const convertTo = async (from: "file" | "datapath") => {
            const run = from === "file" ? await qemuConvert(["-f", "raw", "-O", qemu, ...options, raw, scratchOut]) : await throughDatapath(peerSr, peerKey, (nbd) => ["-f", "raw", "-O", qemu, ...options, nbd, scratchOut]);
            rmSync(scratchOut, { force: true });
            return run;
          };
          const result = await rows(
            label,
            timed ? rounds : 1,
            data,
            async () => {
              const transfer = await exportDiskFile(service, String(source.result), format, scratchOut);
              rmSync(scratchOut, { force: true });
              return transfer;
            },
            () => convertTo("file"),
            `qemu-img convert to ${format}`,
            () => convertTo("datapath"),
            made,
          );
          exports.push(...made);
          exportKinds.push(...made.map(() => format));
          if (timed) table.push(...result);
        } catch (error) {
          table.push({ ...unavailableRow(label, `≥ ${TARGET}×`, (error as Error).message.slice(0, 300)), ours: "FAILED" });
        }
      }
    } finally {
      await destroyVdi(service, source.result).catch(() => undefined);
      await destroyVolume(peerSr, peerKey).catch(() => undefined);
    }
    if (imports.length > 0) table.push(rssRow(`peak RSS, disk import, ${name}`, imports, kinds, idle));
    if (exports.length > 0) table.push(rssRow(`peak RSS, disk export, ${name}`, exports, exportKinds, idle));
  } finally {
    rmSync(raw, { force: true });
    rmSync(scratchOut, { force: true });
  }
  return table;
}

export async function run(): Promise<void> {
  const sizes = xvaSizes();
  const workspace = openWorkspace("hangar-bench-disks");
  const profileDir = process.env.HANGAR_BENCH_CPU_PROF || undefined;
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
  let servicePid = -1;
  const started = Date.now();
  let table: Row[] = [];
  try {
    await workspace.withScratch("disks", async (scratch) => {
      const service = await startXvaService(join(scratch.fast, "data"), profilingEnv(profileDir));
      servicePid = service.pid;
      scratch.defer(() => service.stop());
      const pool = (await service.client.call(z.array(z.string()), "pool.get_all"))[0];
      const sr = await service.client.call(z.string(), "pool.get_default_SR", pool);
      const idle = currentRss(service);
      // Memory first at 1 GiB (one transfer of each kind), then every row at 4 GiB.
      table = [...(await diskRows(service, scratch, sr, sizes.small, 1, idle, false)), ...(await diskRows(service, scratch, sr, sizes.big, sizes.rounds, idle, true))];
    });
  } finally {
    await workspace.close();
  }
  if (profileDir !== undefined) log(`CPU profiles in ${profileDir}, by self time:\n${summariseProfiles(profileDir, servicePid)}`);
  const memory = (r: Row) => r.measure.startsWith("peak RSS");
  const ordered = [...table.filter((r) => !memory(r)), ...table.filter(memory)];
  const title = `Hangar disks bench — scale ${sizes.scale}, ${sizes.rounds} round(s), ${((Date.now() - started) / 1000).toFixed(0)} s in all; MB/s of disk data, CPU/GiB of disk data; peak RSS target < ${formatSize(RSS_TARGET)}`;
  process.stdout.write(`${renderTable(title, ordered)}\n`);
  if (table.some((r) => r.ours === "FAILED")) process.exitCode = 1;
}
