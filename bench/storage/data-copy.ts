// Row group 2: Data.copy of a half-allocated volume (allocated and unallocated stripes alternate) through
// the nbd datapath plugin to a fresh sparse target served by qemu-nbd, against nbdcopy copying from the
// same volume's export (as Datapath.attach hands it out) to the same kind of target. Both copy only the
// allocated data onto a zeroed target: Data.copy gets the allocated blocks as its blocklist, nbdcopy gets
// --destination-is-zero. Ours is timed from the Data.copy call (an exec) until the operation's record says
// it ended (Data.stat then confirms success); the daemon's own copy time, from the start and end the record
// holds, is a second row: the copy engine alone.
import { existsSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { volumeUri } from "../../server/plugins/uris.ts";
import type { Blocklist, Operation } from "../../server/storage/types.ts";
import { formatSize, interleave, megabytesPerSecond, spread, summarise, timeSeconds, type Samples } from "../measure.ts";
import type { Row } from "../table.ts";
import type { Scratch } from "../workspace.ts";
import { contentAt, writeVolume, type Extent } from "./content.ts";
import { nbdcopy, serveQemu, toNbdUri } from "./nbd-export.ts";
import { DBG, pluginClient, pluginDir } from "./plugins.ts";
import type { StorageSizes } from "./sizes.ts";
import { createBenchSr, createBenchVolume } from "./sr.ts";

const TARGET = 0.9;
const DATAPATH = "nbd";
const DOMAIN = "0";
const BLOCK = 64 * 1024;
/** How often the operation record is looked at while a copy runs. */
const WATCH_MS = 10;
const COPY_TIMEOUT_MS = 300_000;
const CONTENDERS = ["Data.copy", "nbdcopy"] as const;
type Contender = (typeof CONTENDERS)[number];

/** The nbd datapath plugin is being written elsewhere: the rows say so when it is not there. */
export function nbdDatapathAvailable(): boolean {
  return existsSync(join(pluginDir("datapath", DATAPATH), "plugin.ts")) && existsSync(join(pluginDir("datapath", DATAPATH), "Data.copy"));
}

/** Stripes 0, 2, 4... of `stripe` bytes are allocated. */
function allocatedStripes(size: number, stripe: number): Extent[] {
  const extents: Extent[] = [];
  for (let offset = 0; offset < size; offset += 2 * stripe) extents.push({ offset, length: Math.min(stripe, size - offset) });
  return extents;
}

function toBlocklist(extents: readonly Extent[]): Blocklist {
  return { blocksize: BLOCK, ranges: extents.map(({ offset, length }): [number, number] => [offset / BLOCK, Math.ceil(length / BLOCK)]) };
}

export async function benchDataCopy(scratch: Scratch, sizes: StorageSizes): Promise<Row[]> {
  const dir = scratch.fast;
  const sr = await createBenchSr(scratch, dir, "sr");
  const size = sizes.copyBytes;
  const key = await createBenchVolume(sr, "copy source", size);
  const allocated = allocatedStripes(size, sizes.copyStripe);
  const dataBytes = allocated.reduce((sum, e) => sum + e.length, 0);
  await writeVolume(sr, key, allocated);

  const plugin = pluginClient("datapath", DATAPATH);
  const uri = volumeUri(DATAPATH, sr, key);
  const blocklist = toBlocklist(allocated);
  const { readOperation } = await import("../../server/plugins/datapath/nbd/operations.ts");
  // As the toolstack drives a running VM's disk: open, attach (the daemon starts serving), activate; undone
  // in reverse when the section ends.
  await plugin.call("Datapath.open", { dbg: DBG, uri, persistent: true });
  scratch.defer(() => plugin.call("Datapath.close", { dbg: DBG, uri }));
  const backend = await plugin.call("Datapath.attach", { dbg: DBG, uri, domain: DOMAIN });
  scratch.defer(() => plugin.call("Datapath.detach", { dbg: DBG, uri, domain: DOMAIN }));
  await plugin.call("Datapath.activate", { dbg: DBG, uri, domain: DOMAIN });
  scratch.defer(() => plugin.call("Datapath.deactivate", { dbg: DBG, uri, domain: DOMAIN }));
  const nbd = backend.implementations.find((implementation) => implementation[0] === "Nbd");
  if (nbd === undefined || nbd[0] !== "Nbd") throw new Error(`Datapath.attach offered no Nbd implementation: ${JSON.stringify(backend)}`);
  return measureCopies(dir, sizes, {
    size,
    allocated,
    dataBytes,
    ourExport: toNbdUri(nbd[1].uri),
    copy: async (remote) => {
      const operation = await plugin.call("Data.copy", { dbg: DBG, uri, domain: DOMAIN, remote, blocklist });
      return {
        ended: () => waitUntilEnded(operation),
        confirm: () => confirmCompleted(operation),
        engineSeconds: () => {
          const record = readOperation(operation[1]);
          return record === undefined ? null : (Date.parse(record.updated) - Date.parse(record.started)) / 1000;
        },
        destroy: () => plugin.call("Data.destroy", { dbg: DBG, operation }).then(() => undefined),
      };
    },
  });

  // Watching the record (a cheap file read) rather than polling Data.stat: a Node process per poll would
  // steal CPU from the copy on a small machine and blur the end by a poll interval.
  async function waitUntilEnded(operation: Operation): Promise<void> {
    const deadline = Date.now() + COPY_TIMEOUT_MS;
    while (readOperation(operation[1])?.state === "running") {
      if (Date.now() > deadline) throw new Error(`Data.copy ${operation[1]} not complete after ${COPY_TIMEOUT_MS / 1000} s`);
      await sleep(WATCH_MS);
    }
  }

  async function confirmCompleted(operation: Operation): Promise<void> {
    const status = await plugin.call("Data.stat", { dbg: DBG, operation });
    if (!status.complete || status.failed) throw new Error(`Data.copy ${operation[1]} ended with status ${JSON.stringify(status)}`);
  }
}

interface StartedCopy {
  /** Resolves once the operation's record says it ended (the timer stops there). */
  ended(): Promise<void>;
  /** Confirms through Data.stat that it completed without failing. */
  confirm(): Promise<void>;
  /** The daemon's own copy time, from the operation record (null if unreadable). */
  engineSeconds(): number | null;
  destroy(): Promise<void>;
}

interface CopySetup {
  size: number;
  allocated: readonly Extent[];
  dataBytes: number;
  /** nbdcopy's source: the export Datapath.attach handed out. */
  ourExport: string;
  copy(remote: string): Promise<StartedCopy>;
}

async function measureCopies(dir: string, sizes: StorageSizes, setup: CopySetup): Promise<Row[]> {
  const { size, allocated, dataBytes, ourExport } = setup;
  const engineSeconds: number[] = [];
  let runs = 0;
  /** A fresh zeroed (sparse) target file served by a fresh qemu-nbd for every copy. */
  const withTarget = async (work: (targetUri: string) => Promise<number>): Promise<number> => {
    const file = join(dir, `target-${runs++}.raw`);
    writeFileSync(file, "");
    truncateSync(file, size);
    const target = await serveQemu(dir, "target", file, { readOnly: false });
    try {
      const seconds = await work(target.uri);
      await expectCopied(file, allocated, size);
      return seconds;
    } finally {
      await target.stop();
      rmSync(file, { force: true });
    }
  };
  const copy = (contender: Contender) =>
    withTarget(async (targetUri) => {
      if (contender === "nbdcopy") return nbdcopy(["--destination-is-zero", ourExport, targetUri]);
      let started: StartedCopy | undefined;
      const seconds = await timeSeconds(async () => {
        started = await setup.copy(targetUri);
        await started.ended();
      });
      await started!.confirm();
      const engine = started!.engineSeconds();
      if (engine !== null) engineSeconds.push(engine);
      await started!.destroy();
      return seconds;
    });

  for (const contender of CONTENDERS) await copy(contender); // warm-up
  engineSeconds.length = 0;
  const times = await interleave(sizes.runs, CONTENDERS, copy);
  const what = `${formatSize(size)} volume, ${formatSize(dataBytes)} allocated in ${formatSize(sizes.copyStripe)} stripes, to qemu-nbd`;
  const rate = (seconds: number) => megabytesPerSecond(dataBytes, seconds);
  const rows = [copyRow(`Data.copy ${what}, Data.copy call → copy ended`, times["Data.copy"], times.nbdcopy, rate)];
  if (engineSeconds.length > 0) {
    rows.push(copyRow(`Data.copy ${what}, daemon copy time (operation record)`, summarise(engineSeconds), times.nbdcopy, rate));
  }
  return rows;
}

function copyRow(measure: string, ours: Samples, baseline: Samples, rate: (seconds: number) => number): Row {
  // Speeds, so that the ratio reads like the other throughput rows: ≥ 0.9× means at most ~11% slower.
  const ratio = baseline.median / ours.median;
  return {
    measure,
    ours: `${ours.median.toFixed(2)} s (${rate(ours.median).toFixed(0)} MB/s)`,
    baseline: `${baseline.median.toFixed(2)} s (${rate(baseline.median).toFixed(0)} MB/s) nbdcopy from our export`,
    ratio,
    target: `≥ ${TARGET}×`,
    met: ratio >= TARGET,
    note: `runs ${spread(ours, 2)} vs ${spread(baseline, 2)} s`,
  };
}

/** A copy that did not copy would be fast: check one allocated and one unallocated stripe of the target. */
async function expectCopied(file: string, allocated: readonly Extent[], size: number): Promise<void> {
  const handle = await open(file, "r");
  try {
    const last = allocated[allocated.length - 1]!;
    const length = Math.min(last.length, 1024 * 1024);
    const data = Buffer.alloc(length);
    await handle.read(data, 0, length, last.offset);
    if (!data.equals(contentAt(last.offset, length, 0))) throw new Error(`the copy target differs from the volume at ${last.offset}`);
    const holeAt = allocated[0]!.offset + allocated[0]!.length;
    if (holeAt < size) {
      const hole = Buffer.alloc(Math.min(length, size - holeAt));
      await handle.read(hole, 0, hole.length, holeAt);
      if (hole.some((byte) => byte !== 0)) throw new Error(`the copy target is not zero in the unallocated stripe at ${holeAt}`);
    }
  } finally {
    await handle.close();
  }
}
