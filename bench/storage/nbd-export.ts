// The exports the storage suite reads and writes with nbdcopy: ours (server/nbd behind a file SR volume or
// a raw file, in a process of its own like the datapath's daemon) and qemu-nbd's, the reference.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseNbdUri } from "../../server/nbd/uri.ts";
import { interleave, megabytesPerSecond, spread, summarise, type Samples } from "../measure.ts";
import { cpuSeconds, runCommand, startService, type Service } from "../processes.ts";

const SERVE_EXPORT = fileURLToPath(new URL("./serve-export.ts", import.meta.url));
/** Generous: a 1 GiB transfer takes a few seconds even on a loaded machine. */
const TRANSFER_TIMEOUT_MS = 180_000;

export interface NbdExport extends Service {
  /** `nbd+unix:///?socket=…` for nbdcopy and the datapath's Data.copy. */
  readonly uri: string;
}

export type OurBackend = { raw: string } | { sr: string; key: string };

async function serve(socketPath: string, command: string, args: string[]): Promise<NbdExport> {
  const service = await startService(command, args, socketPath);
  return { pid: service.pid, stop: () => service.stop(), uri: `nbd+unix:///?socket=${socketPath}` };
}

/** Our NbdServer serving `backend` as the default export on `<dir>/<name>.sock`. */
export function serveOurs(dir: string, name: string, backend: OurBackend, options: { readOnly: boolean }): Promise<NbdExport> {
  const socketPath = join(dir, `${name}.sock`);
  const mode = options.readOnly ? "ro" : "rw";
  const args = "raw" in backend ? ["raw", backend.raw, mode] : ["volume", backend.sr, backend.key, mode];
  return serve(socketPath, process.execPath, [SERVE_EXPORT, socketPath, ...args]);
}

/** qemu-nbd serving a raw file (its defaults: writeback cache, thread-pool AIO), kept up across clients. */
export function serveQemu(dir: string, name: string, file: string, options: { readOnly: boolean }): Promise<NbdExport> {
  const socketPath = join(dir, `${name}.sock`);
  const args = ["--format=raw", "--persistent", `--socket=${socketPath}`, ...(options.readOnly ? ["--read-only"] : []), file];
  return serve(socketPath, "qemu-nbd", args);
}

/** `nbd:unix:<socket>:exportname=<name>` (what Datapath.attach answers) as an NBD URI nbdcopy takes. */
export function toNbdUri(xapiUri: string): string {
  const target = parseNbdUri(xapiUri);
  if (target.kind !== "unix") throw new Error(`expected a unix-socket NBD export, got ${xapiUri}`);
  return `nbd+unix:///${encodeURIComponent(target.exportName)}?socket=${target.socketPath}`;
}

/** Runs nbdcopy with `args`; returns the wall-clock seconds it took. */
export async function nbdcopy(args: readonly string[]): Promise<number> {
  return (await runCommand("nbdcopy", args, { timeoutMs: TRANSFER_TIMEOUT_MS })).seconds;
}

export interface TransferSamples {
  /** MB/s. */
  speed: Samples;
  /** CPU seconds the serving process used per GiB moved: steadier than speed on a shared machine. */
  cpuPerGiB: Samples;
}

/**
 * nbdcopy with `argsOf(name)` against each export: one warm-up each (JIT, buffer pools, first allocation),
 * then `runs` interleaved runs; `bytes` is what one run moves.
 */
export async function measureTransfers<K extends string>(
  exports: Record<K, NbdExport>,
  argsOf: (name: K) => string[],
  bytes: number,
  runs: number,
): Promise<Record<K, TransferSamples>> {
  const names = Object.keys(exports) as K[];
  for (const name of names) await nbdcopy(argsOf(name));
  const cpu = new Map<K, number[]>(names.map((name) => [name, []]));
  const speeds = await interleave(runs, names, async (name) => {
    const before = cpuSeconds(exports[name].pid);
    const seconds = await nbdcopy(argsOf(name));
    cpu.get(name)!.push((cpuSeconds(exports[name].pid) - before) / (bytes / 2 ** 30));
    return megabytesPerSecond(bytes, seconds);
  });
  return Object.fromEntries(names.map((name) => [name, { speed: speeds[name], cpuPerGiB: summarise(cpu.get(name)!) }])) as Record<K, TransferSamples>;
}

/** The notes of a transfer row: spread of the runs and server CPU, ours vs the baseline. */
export function transferNote(ours: TransferSamples, baseline: TransferSamples): string {
  return `runs ${spread(ours.speed)} vs ${spread(baseline.speed)} MB/s; server CPU ${ours.cpuPerGiB.median.toFixed(2)} vs ${baseline.cpuPerGiB.median.toFixed(2)} s/GiB`;
}
