// Conformance runs as jobs of the console's server process: one at a time (the suite works the disk and
// the plugin hard, on a shared host), each result kept as it ends so the page can poll it, the run's
// scratch SR directory under the data dir removed afterwards. Finished runs are kept a while for the page.
import "server-only";

import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { TRPCError } from "@trpc/server";
import { dataDir } from "../../config.ts";
import type { CheckResult } from "../../conformance/check.ts";
import { CHECKS } from "../../conformance/checks/index.ts";
import { countResults } from "../../conformance/report.ts";
import { runConformance } from "../../conformance/runner.ts";
import { srConfiguration } from "../../conformance/sr-config.ts";
import { findPlugin } from "../storage-access.ts";
import type { TConformanceRun, TStartConformanceInput } from "./schema.ts";
import { ZStartConformanceSchema } from "./schema.ts";

/** Finished runs are kept this long, and at most KEPT_RUNS of them. */
const KEPT_MS = 60 * 60 * 1000;
const KEPT_RUNS = 20;

interface Job {
  run: TConformanceRun;
  abort: AbortController;
  done: Promise<void>;
}

// On globalThis: Next's dev server reloads modules, and a run must outlive a reload of this one.
const store = globalThis as typeof globalThis & { __hangarConformanceJobs?: Map<string, Job> };
const jobs = (store.__hangarConformanceJobs ??= new Map<string, Job>());

function prune(now = Date.now()): void {
  const finished = [...jobs.values()].filter((job) => job.run.finishedAt !== null).sort((a, b) => b.run.finishedAt!.localeCompare(a.run.finishedAt!));
  finished.forEach((job, i) => {
    if (i >= KEPT_RUNS || now - Date.parse(job.run.finishedAt!) > KEPT_MS) jobs.delete(job.run.id);
  });
}

const snapshot = (run: TConformanceRun): TConformanceRun => ({ ...run, results: [...run.results], counts: { ...run.counts } });

function result(check: CheckResult): TConformanceRun["results"][number] {
  // The runner speaks to CLI users ("no --datapath"); the page has a datapath choice instead.
  const reason = check.reason?.replace("no --datapath", "no datapath was chosen for this run") ?? null;
  return { name: check.name, status: check.status, reason, durationMs: check.durationMs };
}

/** Starts a run against a volume plugin of `root`; CONFLICT while another runs. */
export async function startRun(root: string, given: TStartConformanceInput): Promise<TConformanceRun> {
  const input = ZStartConformanceSchema.parse(given);
  prune();
  const running = [...jobs.values()].find((job) => job.run.state === "running");
  if (running !== undefined) {
    throw new TRPCError({ code: "CONFLICT", message: `Conformance checks of "${running.run.plugin}" are running: wait for them to finish (or cancel them) first.` });
  }
  // Refused here, with the console's words, rather than as a failed run.
  const volume = await findPlugin(root, input.plugin, "volume");
  if (input.datapath !== null) await findPlugin(root, input.datapath, "datapath");

  const run: TConformanceRun = {
    id: randomUUID(),
    plugin: volume.type,
    datapath: input.datapath,
    state: "running",
    error: null,
    total: CHECKS.length,
    results: [],
    counts: { passed: 0, failed: 0, skipped: 0, notes: 0 },
    startedAt: new Date().toISOString(),
    finishedAt: null,
  };
  const abort = new AbortController();
  const job: Job = { run, abort, done: Promise.resolve() };
  jobs.set(run.id, job);
  job.done = (async () => {
    let scratch: string | undefined;
    try {
      let configuration = input.configuration;
      if (configuration === undefined || Object.keys(configuration).length === 0) {
        // The SR the suite makes lives under the data dir, not /tmp (often small, or memory).
        await mkdir(dataDir(), { recursive: true });
        scratch = await mkdtemp(join(dataDir(), "conformance-"));
        await mkdir(join(scratch, "sr"));
        configuration = srConfiguration(volume.query.configuration, undefined, join(scratch, "sr"));
      }
      const report = await runConformance(
        { root, plugin: volume.dir, datapath: input.datapath ?? undefined, configuration, signal: abort.signal },
        (check) => {
          run.results.push(result(check));
          run.counts = countResults(run.results.map((r) => ({ ...r, reason: r.reason ?? undefined })));
          run.total = Math.max(run.total, run.results.length);
        },
      );
      run.counts = { passed: report.passed, failed: report.failed, skipped: report.skipped, notes: report.notes };
      run.state = abort.signal.aborted ? "cancelled" : "finished";
    } catch (error) {
      run.state = "error";
      run.error = error instanceof Error ? error.message : String(error);
    } finally {
      if (scratch !== undefined) await rm(scratch, { recursive: true, force: true }).catch(() => undefined);
      run.finishedAt = new Date().toISOString();
    }
  })();
  return snapshot(run);
}

/** A run as it stands; NOT_FOUND once it is forgotten. */
export function getRun(id: string): TConformanceRun {
  const job = jobs.get(id);
  if (job === undefined) throw new TRPCError({ code: "NOT_FOUND", message: "That conformance run is no longer kept: run the checks again." });
  return snapshot(job.run);
}

/** The runs kept, newest first; of one plugin when given. */
export function listRuns(plugin?: string): TConformanceRun[] {
  prune();
  return [...jobs.values()]
    .map((job) => snapshot(job.run))
    .filter((run) => plugin === undefined || run.plugin === plugin)
    .sort((a, b) => b.startedAt.localeCompare(a.startedAt));
}

/** Skips the remaining checks; the clean-up still runs. */
export function cancelRun(id: string): TConformanceRun {
  const job = jobs.get(id);
  if (job === undefined) throw new TRPCError({ code: "NOT_FOUND", message: "That conformance run is no longer kept." });
  job.abort.abort();
  return snapshot(job.run);
}

/** For tests: waits until the run has ended. */
export async function settled(id: string): Promise<TConformanceRun> {
  await jobs.get(id)?.done;
  return getRun(id);
}
