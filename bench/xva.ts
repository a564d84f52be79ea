// The XVA suite (`npm run bench -- xva`): VM export and import over HTTP against `hangar serve` (a process of
// its own, data dir on tmpfs), each next to a baseline measured in the same run on the same bytes: a plain
// export against `cat` of the raw disk, compressed exports against pigz and zstd compressing the saved plain
// export, imports against the export of the same archive, and the service's peak memory during all of them.
// Wall time and CPU per GiB of disk data; progress to stderr, the table to stdout. See bench/README.md.
import { mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { formatSize, GiB, interleave, megabytesPerSecond, MiB, type Samples, spread, summarise } from "./measure.ts";
import { endedChildrenCpuSeconds, runCommand } from "./processes.ts";
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { openWorkspace } from "./workspace.ts";
import { writeRawDisk, xvaFromRaw } from "./xva/disk.ts";
import { profilingEnv, summariseProfiles } from "./xva/profile.ts";
import { serveFileOnce } from "./xva/reference.ts";
import { currentRss, type Cost, startXvaService, type XvaService } from "./xva/service.ts";
import { dataBytes, type DiskLayout, xvaSizes } from "./xva/sizes.ts";
import { type Compression, destroyVm, exportVm, importFile, importStream, type Transfer } from "./xva/transfer.ts";
import { libraryPeer } from "./xva/library-peer.ts";
import { cpIntoSrFilesystem, nbdcopyIntoFreshVolume, relayIntoFreshVolume, warmMemory } from "./xva/write-baselines.ts";

const log = (message: string) => void process.stderr.write(`[bench xva] ${message}\n`);

const COMPRESSIONS: readonly Compression[] = ["none", "gzip", "zstd"];
const SUFFIX: Record<Compression, string> = { none: "xva", gzip: "xva.gz", zstd: "xva.zst" };
export const RSS_TARGET = 256 * MiB;

/** One run of a baseline tool, its output thrown away: wall and CPU seconds (rusage of the reaped child). */
async function tool(script: string, input: string): Promise<{ seconds: number; cpu: number }> {
  const cpuBefore = endedChildrenCpuSeconds();
  // exec: the shell becomes the tool, so the CPU is the tool's alone.
  const { seconds } = await runCommand("sh", ["-c", `exec ${script} "$1" > /dev/null`, "sh", input], { timeoutMs: 15 * 60_000 });
  return { seconds, cpu: endedChildrenCpuSeconds() - cpuBefore };
}

const BASELINES: Record<Compression, { name: string; script: string; target: number }> = {
  none: { name: "cat", script: "cat", target: 0.8 },
  gzip: { name: "pigz -1", script: "pigz -1 -c", target: 0.95 },
  zstd: { name: "zstd -T0 -3", script: "zstd -T0 -3 -q -c", target: 0.9 },
};

const IMPORT_TARGET = 0.8;

/** Everything the service spent, per GiB of disk data. */
export function cpuPerGiB(cost: Cost, data: number): number {
  return (cost.service + cost.plugins + cost.daemons) / (data / GiB);
}

export function costNote(costs: readonly Cost[], data: number): string {
  const median = (pick: (cost: Cost) => number) => summarise(costs.map(pick)).median / (data / GiB);
  return `CPU/GiB ${median((c) => c.service + c.plugins + c.daemons).toFixed(2)} s (service ${median((c) => c.service).toFixed(2)}, plugin execs ${median((c) => c.plugins).toFixed(2)}, NBD daemons ${median((c) => c.daemons).toFixed(2)})`;
}

export const speed = (data: number, seconds: number) => `${seconds.toFixed(1)} s, ${megabytesPerSecond(data, seconds).toFixed(0)} MB/s`;

interface Saved {
  path: string;
  /** The export that made it (untimed: also the warm-up). */
  transfer: Transfer;
}

/** A VM with a disk of this layout, imported from an XVA made from its raw file; returns the VM and the raw file. */
export async function makeVm(service: XvaService, dir: string, disk: DiskLayout, name: string): Promise<{ vm: string; raw: string }> {
  const raw = join(dir, `${name}.raw`);
  const started = Date.now();
  const written = writeRawDisk(raw, disk);
  log(`${name}: raw disk of ${formatSize(disk.size)} with ${formatSize(written)} of data in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const imported = await importStream(service, xvaFromRaw(raw, disk, name));
  if (imported.vms.length !== 1) throw new Error(`the set-up import made ${imported.vms.length} VMs`);
  log(`${name}: imported in ${imported.seconds.toFixed(1)} s (peak RSS ${formatSize(imported.cost.peakRss)})`);
  return { vm: imported.vms[0]!, raw };
}

async function saveExport(service: XvaService, vm: string, compression: Compression, path: string): Promise<Saved> {
  const transfer = await exportVm(service, vm, compression, path);
  log(`saved ${compression} export: ${formatSize(statSync(path).size)} in ${transfer.seconds.toFixed(1)} s`);
  return { path, transfer };
}

/** The service's CPU per GiB of a compressed export at most this many times the compressor CLI's own. */
const CPU_TARGET = 1.3;

/**
 * Ours against a baseline tool, interleaved; for a compressed export also against node:zlib alone (the
 * do-nothing peer: the library ours compresses with, no server) and the service's CPU per GiB against the
 * tool's and the peer's. Rows: the export, then (compressed) the CPU row and the peer row.
 */
async function exportRows(service: XvaService, rounds: number, vm: string, compression: Compression, input: string, data: number, label: string, transfers: Transfer[]): Promise<{ rows: Row[]; ours: Samples }> {
  const baseline = BASELINES[compression];
  const toolCpu: number[] = [];
  const peerCpu: number[] = [];
  const ourCosts: Cost[] = [];
  const contenders = compression === "none" ? (["ours", "baseline"] as const) : (["ours", "baseline", "peer"] as const);
  const samples = await interleave(rounds, contenders, async (who, round) => {
    if (who === "ours") {
      const transfer = await exportVm(service, vm, compression);
      transfers.push(transfer);
      ourCosts.push(transfer.cost);
      log(`${label} round ${round + 1}/${rounds}: ours ${speed(data, transfer.seconds)}, CPU/GiB ${cpuPerGiB(transfer.cost, data).toFixed(2)} s`);
      return transfer.seconds;
    }
    const run = who === "peer" && compression !== "none" ? await libraryPeer(compression, input) : await tool(baseline.script, input);
    (who === "peer" ? peerCpu : toolCpu).push(run.cpu);
    log(`${label} round ${round + 1}/${rounds}: ${who === "peer" ? "node:zlib alone" : baseline.name} ${speed(data, run.seconds)}, CPU/GiB ${(run.cpu / (data / GiB)).toFixed(2)} s`);
    return run.seconds;
  });
  const ours = samples.ours;
  const ratio = samples.baseline.median / ours.median;
  const perGiB = (values: number[]) => summarise(values).median / (data / GiB);
  const toolCpuPerGiB = perGiB(toolCpu);
  const rows: Row[] = [
    {
      measure: label,
      ours: speed(data, ours.median),
      baseline: `${speed(data, samples.baseline.median)} ${baseline.name}`,
      ratio,
      target: `≥ ${baseline.target}×`,
      met: ratio >= baseline.target,
      note: `${costNote(ourCosts, data)} vs ${baseline.name} ${toolCpuPerGiB.toFixed(2)} s; spread ${spread(ours, 1)} vs ${spread(samples.baseline, 1)} s`,
    },
  ];
  const peer = (samples as Partial<Record<"peer", Samples>>).peer;
  if (peer !== undefined) {
    const serviceCpu = perGiB(ourCosts.map((cost) => cost.service));
    const peerCpuPerGiB = perGiB(peerCpu);
    rows.push(
      {
        measure: `  the service's CPU per GiB, ${compression} export`,
        ours: `${serviceCpu.toFixed(2)} s`,
        baseline: `${toolCpuPerGiB.toFixed(2)} s ${baseline.name}`,
        ratio: serviceCpu / toolCpuPerGiB,
        target: `≤ ${CPU_TARGET}×`,
        met: serviceCpu / toolCpuPerGiB <= CPU_TARGET,
        note: `against node:zlib alone (${peerCpuPerGiB.toFixed(2)} s): ${(serviceCpu / peerCpuPerGiB).toFixed(2)}×; CPU is utime + stime of all threads (rusage for the tools)`,
      },
      {
        measure: `  (re-stated: ${compression} export against node:zlib alone compressing the saved export on all cores)`,
        ours: speed(data, ours.median),
        baseline: `${speed(data, peer.median)} node:zlib`,
        ratio: peer.median / ours.median,
        target: `≥ ${baseline.target}×`,
        met: peer.median / ours.median >= baseline.target,
        note: `the do-nothing peer: the library ours compresses with, no server; its CPU/GiB ${peerCpuPerGiB.toFixed(2)} s against ${baseline.name} ${toolCpuPerGiB.toFixed(2)} s; spread ${spread(peer, 1)} s`,
      },
    );
  }
  return { ours, rows };
}

/** No target: how far the plain export is from Node's own HTTP streaming of the same bytes from a file. */
async function referenceRow(rounds: number, path: string, ours: Samples, data: number): Promise<Row> {
  const runs: Array<{ seconds: number; cpu: number }> = [];
  for (let round = 0; round < rounds; round++) runs.push(await serveFileOnce(path));
  const reference = summarise(runs.map((r) => r.seconds));
  log(`reference: bare Node HTTP file server ${speed(data, reference.median)}`);
  return {
    measure: "  (reference: the same export.xva from a bare Node HTTP file server, same curl)",
    ours: speed(data, ours.median),
    baseline: `${speed(data, reference.median)} node http`,
    ratio: reference.median / ours.median,
    target: "",
    met: null,
    note: `server CPU/GiB ${(summarise(runs.map((r) => r.cpu)).median / (data / GiB)).toFixed(2)} s (fs stream → response, no datapath, NBD, tar or checksums)`,
  };
}

export function rssRow(label: string, transfers: readonly Transfer[], kinds: readonly string[], idle: number): Row {
  const peaks = transfers.map((t) => t.cost.peakRss);
  const peak = Math.max(...peaks);
  return {
    measure: label,
    ours: formatSize(peak),
    baseline: `idle ${formatSize(idle)}`,
    ratio: null,
    target: `< ${formatSize(RSS_TARGET)}`,
    met: peak < RSS_TARGET,
    note: `the service's VmHWM, reset as each transfer began; per transfer (RSS at its start → peak): ${transfers.map((t, n) => `${kinds[n]} ${formatSize(t.cost.startRss)} → ${formatSize(t.cost.peakRss)}`).join(", ")}`,
  };
}

export async function run(): Promise<void> {
  const sizes = xvaSizes();
  const workspace = openWorkspace("hangar-bench-xva");
  const profileDir = process.env.HANGAR_BENCH_CPU_PROF || undefined;
  if (profileDir !== undefined) mkdirSync(profileDir, { recursive: true });
  const started = Date.now();
  const rows: Row[] = [];
  const failed = (measure: string, target: string, error: unknown) => {
    log(`${measure} failed: ${(error as Error).stack}`);
    rows.push({ ...unavailableRow(measure, target, (error as Error).message.slice(0, 300)), ours: "FAILED" });
  };
  const big = sizes.big;
  const bigData = dataBytes(big);
  const bigName = `${formatSize(big.size)} disk, ${formatSize(bigData)} data`;
  let servicePid = -1;
  try {
    await workspace.withScratch("xva", async (scratch) => {
      // On tmpfs: the rows measure the software, not the disk.
      const service = await startXvaService(join(scratch.fast, "data"), profilingEnv(profileDir));
      servicePid = service.pid;
      scratch.defer(() => service.stop());
      const idle = currentRss(service);

      // Memory, first on a fresh service: the small disk's transfers, one of each kind (the big disk's are all
      // those of the rows below).
      const small = sizes.small;
      const smallName = `${formatSize(small.size)} disk, ${formatSize(dataBytes(small))} data`;
      try {
        log(`memory: VM with a ${smallName}`);
        const made = await makeVm(service, scratch.fast, small, "small");
        rmSync(made.raw, { force: true });
        const smallExports: Transfer[] = [];
        const smallImports: Transfer[] = [];
        for (const compression of COMPRESSIONS) {
          const path = join(scratch.fast, `small.${SUFFIX[compression]}`);
          smallExports.push((await saveExport(service, made.vm, compression, path)).transfer);
          const transfer = await importFile(service, path);
          for (const vm of transfer.vms) await destroyVm(service, vm);
          smallImports.push(transfer);
          rmSync(path, { force: true });
        }
        await destroyVm(service, made.vm);
        rows.push(rssRow(`peak RSS, export, ${smallName}`, smallExports, COMPRESSIONS, idle));
        rows.push(rssRow(`peak RSS, import, ${smallName}`, smallImports, COMPRESSIONS, idle));
      } catch (error) {
        failed(`peak RSS, ${smallName}`, `< ${formatSize(RSS_TARGET)}`, error);
      }
      let vm: string;
      let raw: string;
      try {
        log(`set-up: VM with a ${bigName}`);
        ({ vm, raw } = await makeVm(service, scratch.fast, big, "big"));
      } catch (error) {
        failed(`set-up, ${bigName}`, "", error);
        return;
      }

      // Every transfer of the big disk, for its memory rows.
      const exports: Transfer[] = [];
      const exportKinds: Compression[] = [];
      const imports: Transfer[] = [];
      const importKinds: Compression[] = [];
      const saved = new Map<Compression, Saved>();
      const plain = join(scratch.fast, `export.${SUFFIX.none}`);

      for (const compression of COMPRESSIONS) {
        const label = compression === "none" ? `export, uncompressed, ${bigName}` : `export, ${compression}, ${bigName}`;
        log(`${label}...`);
        try {
          // The saved export is the warm-up, the import rows' archive and (plain) the tools' input.
          const path = join(scratch.fast, `export.${SUFFIX[compression]}`);
          const save = await saveExport(service, vm, compression, path);
          saved.set(compression, save);
          exports.push(save.transfer);
          exportKinds.push(compression);
          const input = compression === "none" ? raw : plain;
          const transfers: Transfer[] = [];
          const { rows: exported, ours } = await exportRows(service, sizes.rounds, vm, compression, input, bigData, label, transfers);
          exports.push(...transfers);
          exportKinds.push(...transfers.map(() => compression));
          rows.push(...exported);
          if (compression === "none") rows.push(await referenceRow(sizes.rounds, path, ours, bigData));
        } catch (error) {
          failed(label, `≥ ${BASELINES[compression].target}×`, error);
        }
      }

      // Imports: the uncompressed one against writing the same data into a fresh volume without the XVA path
      // (nbdcopy through the nbd datapath; cp into the SR's filesystem for the machine's own limit), rounds
      // alternating; the compressed ones against the uncompressed one.
      let plainImport: Samples | undefined;
      for (const compression of COMPRESSIONS) {
        const label = `import, ${compression === "none" ? "uncompressed" : compression}, ${bigName}`;
        const save = saved.get(compression);
        if (save === undefined || (compression !== "none" && plainImport === undefined)) {
          rows.push(unavailableRow(label, `≥ ${IMPORT_TARGET}×`, compression === "none" ? "no export to import" : "no uncompressed import to compare with"));
          continue;
        }
        log(`${label}...`);
        try {
          const times: number[] = [];
          const costs: Cost[] = [];
          const copies: number[] = [];
          const copyCosts: Cost[] = [];
          const cps: Array<{ seconds: number; cpu: number }> = [];
          const relays: Array<{ seconds: number; cost: Cost; relay: number }> = [];
          for (let round = 0; round < sizes.rounds; round++) {
            if (compression === "none") {
              warmMemory(scratch.fast, bigData);
              const copy = await nbdcopyIntoFreshVolume(service, raw, big.size);
              copies.push(copy.seconds);
              copyCosts.push(copy.cost);
              warmMemory(scratch.fast, bigData);
              cps.push(await cpIntoSrFilesystem(service, raw));
              warmMemory(scratch.fast, bigData);
              relays.push(await relayIntoFreshVolume(service, save.path, big.size));
              log(`${label} round ${round + 1}/${sizes.rounds}: nbdcopy ${speed(bigData, copy.seconds)}, cp ${speed(bigData, cps.at(-1)!.seconds)}, relay ${speed(bigData, relays.at(-1)!.seconds)}`);
            }
            warmMemory(scratch.fast, bigData);
            const transfer = await importFile(service, save.path);
            for (const made of transfer.vms) await destroyVm(service, made);
            imports.push(transfer);
            importKinds.push(compression);
            times.push(transfer.seconds);
            costs.push(transfer.cost);
            log(`${label} round ${round + 1}/${sizes.rounds}: ${speed(bigData, transfer.seconds)}, CPU/GiB ${cpuPerGiB(transfer.cost, bigData).toFixed(2)} s`);
          }
          const ours = summarise(times);
          let baseline: Samples;
          let baselineName: string;
          if (compression === "none") {
            plainImport = ours;
            baseline = summarise(copies);
            baselineName = "nbdcopy";
            const cp = summarise(cps.map((c) => c.seconds));
            rows.push({
              measure: `write the same data into a fresh volume: nbdcopy through the nbd datapath, ${bigName}`,
              ours: speed(bigData, baseline.median),
              baseline: `${speed(bigData, cp.median)} cp --sparse`,
              ratio: cp.median / baseline.median,
              target: "",
              met: null,
              note: `the import's baseline; ${costNote(copyCosts, bigData)} vs cp ${(summarise(cps.map((c) => c.cpu)).median / (bigData / GiB)).toFixed(2)} s (cp into a fresh file on the SR's filesystem: the kernel's own cost); spread ${spread(baseline, 1)} vs ${spread(cp, 1)} s`,
            });
          } else {
            baseline = plainImport!;
            baselineName = "import, uncompressed";
          }
          const ratio = baseline.median / ours.median;
          const importRow: Row = {
            measure: label,
            ours: speed(bigData, ours.median),
            baseline: `${speed(bigData, baseline.median)} ${baselineName}`,
            ratio,
            target: `≥ ${IMPORT_TARGET}×`,
            met: ratio >= IMPORT_TARGET,
            note: `${costNote(costs, bigData)}; archive ${formatSize(statSync(save.path).size)}; spread ${spread(ours, 1)} s`,
          };
          rows.push(importRow);
          if (relays.length > 0) {
            const relay = summarise(relays.map((r) => r.seconds));
            rows.push({
              measure: "  (re-stated: against a bare Node HTTP server relaying the same curl -T body into a fresh volume over NBD)",
              ours: speed(bigData, ours.median),
              baseline: `${speed(bigData, relay.median)} relay`,
              ratio: relay.median / ours.median,
              target: `≥ ${IMPORT_TARGET}×`,
              met: relay.median / ours.median >= IMPORT_TARGET,
              note: `the do-nothing peer: the same sockets and daemon, no tar, checksums, records or plugin calls (its volume plugged untimed); ${costNote(relays.map((r) => r.cost), bigData)}, relay server ${(summarise(relays.map((r) => r.relay)).median / (bigData / GiB)).toFixed(2)} s; spread ${spread(relay, 1)} s`,
            });
          }
        } catch (error) {
          failed(label, `≥ ${IMPORT_TARGET}×`, error);
        }
      }
      // The raw file was the baselines' input only: tmpfs is memory.
      rmSync(raw, { force: true });
      for (const save of saved.values()) rmSync(save.path, { force: true });
      await destroyVm(service, vm).catch((error: unknown) => log(`clean-up: ${(error as Error).message}`));

      if (exports.length > 0) rows.push(rssRow(`peak RSS, export, ${bigName}`, exports, exportKinds, idle));
      if (imports.length > 0) rows.push(rssRow(`peak RSS, import, ${bigName}`, imports, importKinds, idle));
    });
  } finally {
    await workspace.close();
  }
  if (profileDir !== undefined) log(`CPU profiles in ${profileDir}, by self time:\n${summariseProfiles(profileDir, servicePid)}`);
  // The memory rows last, though the small disk's are measured first.
  const memory = (row: Row) => row.measure.startsWith("peak RSS");
  const ordered = [...rows.filter((row) => !memory(row)), ...rows.filter(memory)];
  const title = `Hangar XVA bench — scale ${sizes.scale}, ${sizes.rounds} round(s), ${((Date.now() - started) / 1000).toFixed(0)} s in all; MB/s of disk data, CPU/GiB of disk data`;
  process.stdout.write(`${renderTable(title, ordered)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
