// The upload half of the transfers bench: one XVA on disk, imported by a real browser through the console
// (Chromium chooses the file on the VMs page; tus-js-client PATCHes it in 8 MiB chunks to /api/upload; the
// console spools it and streams the spool into the toolstack's PUT /import as it grows) against `curl -T` of
// the same file to /import, interleaved. Both are timed to the import task's success (the VM exists); ours also
// at its last byte acknowledged (the PATCH whose Upload-Offset is the file's length), so the import's tail after
// the upload is seen. The console's RSS is sampled during its uploads; CPU of every party is read from /proc.
import { createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { chromium, type Browser } from "@playwright/test";
import { z } from "zod";
import { SESSION_COOKIE } from "../../server/auth/session.ts";
import { testXva } from "../../server/toolstack/transfer/testing.ts";
import { taskOutcome } from "../../server/transfers/upload/outcome.ts";
import { isFinished, zTaskRecord, type TaskRecord } from "../../server/xenapi/client.ts";
import type { ConsoleService } from "../console/console-service.ts";
import { formatSize, MiB, megabytesPerSecond, perGiB, spread, summarise } from "../measure.ts";
import { endedChildrenCpuSeconds, runCommand } from "../processes.ts";
import type { Row } from "../table.ts";
import type { BenchService } from "../toolstack/service.ts";
import { PatternBlocks } from "./export.ts";
import { browserCeiling, type CeilingRun } from "./browser-ceiling.ts";
import { childrenNamed, processRssBytes, rssBytes, tree, treeCpuSeconds } from "./process-tree.ts";

const TARGET_RATIO = 0.7;
const TAIL_TARGET = 0.1;
const RSS_TARGET_MIB = 300;
const TIMEOUT_MS = 30 * 60_000;
/** How long one event.from waits: the watch notices it was stopped within that. */
const EVENT_WAIT_S = 5;

const zEventBatch = z.object({
  events: z.array(z.object({ class: z.string(), operation: z.string(), ref: z.string(), snapshot: z.unknown().optional() })),
  token: z.string(),
});

/** CPU seconds spent during one transfer, by party. */
interface Cpu {
  toolstack: number;
  console: number;
  /** Chromium's tree for ours, curl for the baseline. */
  client: number;
}

export interface Transfer {
  /** Start → the import task's success, and start → the last byte acknowledged (curl: its exit). */
  seconds: number;
  uploadSeconds: number;
  /** Last byte → the page saying "Imported" (ours only). */
  shownSeconds: number | null;
  cpu: Cpu;
  vms: string[];
}

/** Starts counting CPU; the function returned says what each party spent since. The client is Chromium's tree for a browser upload, the bench's reaped children (curl) for the baseline. */
export function meterCpu(service: BenchService, site: ConsoleService, chromiumPid: number): (client: "browser" | "curl") => Cpu {
  const read = () => {
    const toolstack = service.cpu();
    return { toolstack: toolstack.own + toolstack.plugins, console: treeCpuSeconds(site.pid), chromium: treeCpuSeconds(chromiumPid), reaped: endedChildrenCpuSeconds() };
  };
  const start = read();
  return (client) => {
    const end = read();
    return {
      toolstack: end.toolstack - start.toolstack,
      console: end.console - start.console,
      client: client === "browser" ? end.chromium - start.chromium : end.reaped - start.reaped,
    };
  };
}

/**
 * Takes the task events' token now; the function returned follows them from there and resolves with the first
 * task matching `wanted` to finish, and the moment (performance.now()) its end was seen. Tasks that ended
 * before are never seen: their records no longer change.
 */
async function watchTask(service: BenchService, wanted: (task: TaskRecord) => boolean, stopped: () => boolean): Promise<() => Promise<{ record: TaskRecord; at: number }>> {
  let { token } = await service.client.call(zEventBatch, "event.from", ["task"], "", 0);
  return async () => {
    for (;;) {
      if (stopped()) throw new Error("the upload ended without an import task finishing");
      const batch = await service.client.call(zEventBatch, "event.from", ["task"], token, EVENT_WAIT_S);
      const at = performance.now();
      token = batch.token;
      for (const event of batch.events) {
        if (event.class !== "task" || event.operation === "del") continue;
        const record = zTaskRecord.parse(event.snapshot);
        if (wanted(record) && isFinished(record)) return { record, at };
      }
    }
  };
}

/** The VMs an import task made (an XVA's result, or an OVA's {VM, VDIs, notes}). */
function vmsOf(record: TaskRecord, label: string): string[] {
  if (record.status !== "success") throw new Error(`${label}: task ${record.status}: ${record.error_info.join(" ")}`);
  const outcome = taskOutcome(record, undefined);
  return outcome.kind === "done" ? outcome.vms : [];
}

/** curl -T of the file to /import in a task the bench makes first, timed to the task's success. */
async function curlImport(service: BenchService, site: ConsoleService, chromiumPid: number, file: string, sr: string): Promise<Transfer> {
  const task = await service.client.call(z.string(), "task.create", "bench upload baseline", "curl -T to /import");
  const cpuSince = meterCpu(service, site, chromiumPid);
  const started = performance.now();
  await runCommand("curl", ["-sS", "-f", "-o", "/dev/null", "-T", file, `${service.url}import?session_id=${service.client.session}&sr_id=${sr}&task_id=${task}`], { timeoutMs: TIMEOUT_MS }).catch(async (error: unknown) => {
    await service.client.call(z.unknown(), "task.cancel", task).catch(() => undefined);
    throw error;
  });
  const sent = performance.now();
  const record = await service.client.waitTask(task);
  const ready = performance.now();
  const cpu = cpuSince("curl");
  await service.client.call(z.unknown(), "task.destroy", task).catch(() => undefined);
  return { seconds: (ready - started) / 1000, uploadSeconds: (sent - started) / 1000, shownSeconds: null, cpu, vms: vmsOf(record, "curl -T /import") };
}

/**
 * The file chosen on the VMs page of a fresh browser context (no earlier upload to resume) into `sr`, timed
 * from the choice to the import task's success. `onSample` runs every 100 ms meanwhile, given the seconds since the choice.
 */
export async function browserImport(browser: Browser, service: BenchService, site: ConsoleService, chromiumPid: number, file: string, bytes: number, sr: string, onSample: (seconds: number) => void): Promise<Transfer> {
  const name = file.split("/").pop()!;
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  try {
    await context.addCookies([{ name: SESSION_COOKIE, value: site.cookieValue, url: site.url, httpOnly: true, sameSite: "Strict" }]);
    const page = await context.newPage();
    await page.goto(`${site.url}/vms`);
    await page.getByRole("combobox", { name: "Import into SR" }).selectOption(sr);
    let lastByte: number | undefined;
    page.on("response", (response) => {
      if (lastByte === undefined && response.request().method() === "PATCH" && response.url().includes("/api/upload/") && Number(response.headers()["upload-offset"]) === bytes) lastByte = performance.now();
    });
    let over = false;
    const follow = await watchTask(service, (t) => t.name_label === `VM import: ${name}`, () => over);
    const row = page.getByRole("listitem", { name });
    const cpuSince = meterCpu(service, site, chromiumPid);
    const started = performance.now();
    const sampler = setInterval(() => onSample((performance.now() - started) / 1000), 100);
    const task = follow();
    // Whatever wins the race below, neither loser may end as an unhandled rejection.
    task.catch(() => undefined);
    try {
      await page.getByLabel("VM files to import").setInputFiles(file);
      const failed = row.getByRole("alert").waitFor({ timeout: TIMEOUT_MS }).then(async () => {
        throw new Error(`the page says: ${await row.getByRole("alert").innerText()}`);
      });
      failed.catch(() => undefined);
      const { record, at: ready } = await Promise.race([task, failed]);
      const cpu = cpuSince("browser");
      const shown = await row.getByRole("status").filter({ hasText: "Imported" }).waitFor({ timeout: 60_000 }).then(() => performance.now());
      if (lastByte === undefined) throw new Error("no PATCH response acknowledged the last byte");
      return { seconds: (ready - started) / 1000, uploadSeconds: (lastByte - started) / 1000, shownSeconds: (shown - lastByte) / 1000, cpu, vms: vmsOf(record, "the console's import") };
    } finally {
      clearInterval(sampler);
      over = true;
      await task.catch(() => undefined);
    }
  } finally {
    await context.close();
  }
}

async function writeArchive(file: string, diskBytes: number): Promise<number> {
  await pipeline(testXva({ name: "bench upload", disks: [{ size: diskBytes, blocks: new PatternBlocks() }] }), createWriteStream(file));
  return (await stat(file)).size;
}

export async function benchUploadImport(service: BenchService, site: ConsoleService, sizeBytes: number, runs: number, dir: string): Promise<Row[]> {
  const sr = await service.client.call(z.string(), "pool.get_default_SR", (await service.client.call(z.array(z.string()), "pool.get_all"))[0]);
  const file = join(dir, "bench-upload.xva");
  const warmFile = join(dir, "bench-warm-up.xva");
  process.stderr.write(`  writing the ${formatSize(sizeBytes)} disk's XVA...\n`);
  const bytes = await writeArchive(file, sizeBytes);
  const warmBytes = await writeArchive(warmFile, 16 * MiB);

  return withBenchChromium(async (browser, chromiumPid) => {
    const destroy = (vms: string[]) => destroyVms(service, vms);
    // Warm-up: the routes' first loads, the page's first render.
    await destroy((await browserImport(browser, service, site, chromiumPid, warmFile, warmBytes, sr, () => undefined)).vms);
    await destroy((await curlImport(service, site, chromiumPid, warmFile, sr)).vms);

    const ours: Transfer[] = [];
    const baseline: Transfer[] = [];
    const ceiling: CeilingRun[] = [];
    let peakRss = 0;
    let peakWhen = "";
    let peakServerRss = 0;
    let peakBrowserRss = 0;
    const idleRss = rssBytes(site.pid);
    for (let i = 0; i < runs; i++) {
      process.stderr.write(`  run ${i + 1}/${runs}: curl -T...\n`);
      const base = await curlImport(service, site, chromiumPid, file, sr);
      await destroy(base.vms);
      baseline.push(base);
      process.stderr.write(`  run ${i + 1}/${runs}: Chromium through the console...\n`);
      const mine = await browserImport(browser, service, site, chromiumPid, file, bytes, sr, (seconds) => {
        const rss = rssBytes(site.pid);
        peakServerRss = Math.max(peakServerRss, processRssBytes(site.pid));
        // The processes then: the console's plugin execs (a Node process each) count in its tree.
        if (rss > peakRss) [peakRss, peakWhen] = [rss, `run ${i + 1}, ${seconds.toFixed(1)} s in, ${tree(site.pid).length} processes`];
        peakBrowserRss = Math.max(peakBrowserRss, rssBytes(chromiumPid));
      });
      await destroy(mine.vms);
      ours.push(mine);
      process.stderr.write(`  run ${i + 1}/${runs}: curl ${base.seconds.toFixed(1)} s, ours ${mine.seconds.toFixed(1)} s (last byte at ${mine.uploadSeconds.toFixed(1)} s)\n`);
      const bare = await browserCeiling(browser, chromiumPid, file);
      ceiling.push(bare);
      process.stderr.write(`  run ${i + 1}/${runs}: Chromium into a bare sink ${bare.seconds.toFixed(1)} s\n`);
    }

    const rate = (t: Transfer) => megabytesPerSecond(bytes, t.seconds);
    const oursRate = summarise(ours.map(rate));
    const baseRate = summarise(baseline.map(rate));
    const ratio = oursRate.median / baseRate.median;
    const tail = (t: Transfer) => Math.max(0, t.seconds - t.uploadSeconds);
    const share = summarise(ours.map((t) => tail(t) / t.uploadSeconds));
    const baseShare = summarise(baseline.map((t) => tail(t) / t.uploadSeconds));
    const cpu = (list: Transfer[], party: keyof Cpu) => perGiB(list.map((t) => t.cpu[party]), bytes);
    const bareRate = summarise(ceiling.map((t) => megabytesPerSecond(bytes, t.seconds)));
    return [
      {
        measure: `VM import uploaded from Chromium through the console, ${formatSize(bytes)} XVA (disk ${formatSize(sizeBytes)}, every block data), choice of the file → VM ready`,
        ours: `${oursRate.median.toFixed(0)} MB/s (${summarise(ours.map((t) => t.seconds)).median.toFixed(1)} s)`,
        baseline: `${baseRate.median.toFixed(0)} MB/s (${summarise(baseline.map((t) => t.seconds)).median.toFixed(1)} s) curl -T to /import`,
        ratio,
        target: `≥ ${TARGET_RATIO}×`,
        met: ratio >= TARGET_RATIO,
        note: `${runs} runs each, interleaved; MB/s ${spread(oursRate)} vs ${spread(baseRate)}; CPU s/GiB: console ${cpu(ours, "console")}, Chromium ${cpu(ours, "client")}, toolstack ${cpu(ours, "toolstack")} (curl's run: toolstack ${cpu(baseline, "toolstack")}, curl ${cpu(baseline, "client")})`,
      },
      {
        measure: "Chromium alone: the same file, tus-js-client and 8 MiB PATCHes into a bare server that drops the bytes (the most a console could reach here)",
        ours: `${bareRate.median.toFixed(0)} MB/s`,
        baseline: `${baseRate.median.toFixed(0)} MB/s curl -T to /import`,
        ratio: bareRate.median / baseRate.median,
        target: "—",
        met: null,
        note: `${runs} runs, after each pair above; CPU s/GiB: Chromium ${perGiB(ceiling.map((t) => t.chromiumCpu), bytes)}, the sink ${perGiB(ceiling.map((t) => t.sinkCpu), bytes)}; the console's upload reaches ${((oursRate.median / bareRate.median) * 100).toFixed(0)}% of it`,
      },
      {
        measure: "last uploaded byte → VM ready, share of the upload time",
        ours: `${(share.median * 100).toFixed(1)}% (${summarise(ours.map(tail)).median.toFixed(2)} s after ${summarise(ours.map((t) => t.uploadSeconds)).median.toFixed(1)} s)`,
        baseline: `${(baseShare.median * 100).toFixed(1)}% curl (its exit → task success)`,
        ratio: null,
        target: `≤ ${TAIL_TARGET * 100}%`,
        met: share.median <= TAIL_TARGET,
        note: `last byte: the PATCH answered with Upload-Offset = length; VM ready: the import task's success (event.from); the page said "Imported" ${summarise(ours.map((t) => t.shownSeconds!)).median.toFixed(1)} s after the last byte (it polls every 1 s)`,
      },
      {
        measure: "console RSS during the browser uploads",
        ours: `${(peakRss / MiB).toFixed(0)} MiB peak (the server process alone ${(peakServerRss / MiB).toFixed(0)} MiB)`,
        baseline: `${(idleRss / MiB).toFixed(0)} MiB before`,
        ratio: null,
        target: `< ${RSS_TARGET_MIB} MiB`,
        met: peakRss < RSS_TARGET_MIB * MiB,
        note: `next start and its children (any plugin exec the console runs meanwhile would count), sampled every 100 ms (the peak: ${peakWhen}); Chromium's tree (RSS summed over its processes) peaked at ${(peakBrowserRss / MiB).toFixed(0)} MiB: Playwright hands it the file's path, the file is not held in memory`,
      },
    ];
  });
}

/** Debian's Chromium launched for a bench, with its process id (its CPU and RSS are read from /proc); closed after `work`. */
export async function withBenchChromium<T>(work: (browser: Browser, chromiumPid: number) => Promise<T>): Promise<T> {
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
  try {
    const [chromiumPid] = childrenNamed(process.pid, "chromium");
    if (chromiumPid === undefined) throw new Error("Chromium's process was not found among the bench's children");
    return await work(browser, chromiumPid);
  } finally {
    await browser.close();
  }
}

/** Destroys the VMs a run made, with their disks. */
export function destroyVms(service: BenchService, vms: readonly string[]): Promise<unknown[]> {
  return Promise.all(vms.map((vm) => service.client.call(z.unknown(), "VM.hangar_destroy", vm, false)));
}
