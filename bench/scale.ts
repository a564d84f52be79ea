// The scale suite (`npm run bench -- scale`): the toolstack and the console at ten times what the other suites
// hold, 2,000 VMs with two disks each, 100,000 finished tasks and 100,000 volumes over 10 SRs, measured first at
// a tenth of that (the baseline: the same service in the same run) and again once grown to full size. A call that
// lists everything may grow with what it lists (at most 15×: linear, half again for slack); one that answers about
// a page or an event must not grow (at most 2×); the pages in Chromium have the issue's absolute target (< 1.5 s).
// The service's RSS is read after each phase. Progress to stderr, the table to stdout. See bench/README.md.
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { chromium, type Browser, type Page } from "@playwright/test";
import { z } from "zod";
import { disconnectSr } from "../server/plugins/filesr/db.ts";
import { createVolume } from "../server/plugins/filesr/index.ts";
import { vdiRef } from "../server/xenapi/vdi-identity.ts";
import { startConsole, type ConsoleService } from "./console/console-service.ts";
import { formatSize, positiveEnv, summarise } from "./measure.ts";
import { rssBytes } from "./processes.ts";
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { bigSrVolumeSize } from "./toolstack/big-sr.ts";
import { type BenchService, percentile, prepareCall, startBenchService } from "./toolstack/service.ts";
import { openWorkspace } from "./workspace.ts";

const log = (message: string) => void process.stderr.write(`[bench scale] ${message}\n`);

const FACTOR = 10;
const LISTING_GROWTH = 15;
const FLAT_GROWTH = 2;
const PAGE_TARGET_MS = 1500;
/** Callers seeding at once: enough to keep the service busy on 2 cores. */
const SEEDERS = 8;

interface Size {
  vms: number;
  tasks: number;
  /** Volumes over all SRs, the VMs' disks included. */
  volumes: number;
  srs: number;
  watchers: number;
}

function fullSize(): Size {
  const scale = positiveEnv("HANGAR_BENCH_SCALE", 1);
  const at = (n: number, least: number) => Math.max(least, Math.round(n * scale));
  return { vms: at(2000, 20), tasks: at(100_000, 100), volumes: at(100_000, 400), srs: 10, watchers: at(100, 10) };
}

const tenth = (size: Size): Size => ({ vms: size.vms / FACTOR, tasks: size.tasks / FACTOR, volumes: size.volumes / FACTOR, srs: size.srs, watchers: size.watchers / FACTOR });

/** `work(i)` for i in [from, to), SEEDERS at once. */
async function inParallel(from: number, to: number, work: (i: number) => Promise<unknown>): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: SEEDERS }, async () => {
      while (next < to) await work(next++);
    }),
  );
}

/** What the service holds, grown phase by phase. */
class Seeded {
  vms = 0;
  tasks = 0;
  readonly srs: Array<{ ref: string; path: string; volumes: number }> = [];
  /** The SR holding the VMs' disks (volumes of the others are not in any VM). */
  disks: { ref: string; path: string; keys: string[] } | undefined;

  readonly service: BenchService;

  constructor(service: BenchService) {
    this.service = service;
  }

  async growTo(size: Size): Promise<void> {
    const { client } = this.service;
    const [host] = await client.call(z.array(z.string()), "host.get_all");
    const started = Date.now();
    // The VMs' disks on an SR of their own, the other volumes spread over the other SRs.
    this.disks ??= { ...(await this.#makeSr(host!, "vm-disks")), keys: [] };
    while (this.srs.length < size.srs - 1) this.srs.push({ ...(await this.#makeSr(host!, `volumes-${this.srs.length}`)), volumes: 0 });
    const perSr = Math.ceil((size.volumes - 2 * size.vms) / this.srs.length);
    for (const sr of this.srs) {
      try {
        for (; sr.volumes < perSr; sr.volumes++) await createVolume(sr.path, { name: `volume ${sr.volumes}`, description: "bench", size: bigSrVolumeSize(sr.volumes) });
      } finally {
        disconnectSr(sr.path);
      }
    }
    const disks = this.disks;
    try {
      while (disks.keys.length < 2 * size.vms) disks.keys.push((await createVolume(disks.path, { name: `disk ${disks.keys.length}`, description: "bench", size: 64 * 1024 ** 2 })).key);
    } finally {
      disconnectSr(disks.path);
    }
    log(`volumes: ${this.srs.reduce((sum, sr) => sum + sr.volumes, disks.keys.length).toLocaleString("en")} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    // The library's calls never yielded to I/O: let the client see the keep-alive connections the service closed
    // meanwhile, or the next call goes out on one ("other side closed"), as in createBigSr.
    await sleep(100);
    // The toolstack learns of the new volumes (and announces them) by listing their SRs; the disks' SR last, so
    // its "add" events are the newest when the VBDs are made.
    for (const sr of [...this.srs, disks]) await client.call(z.unknown(), "SR.scan", sr.ref);
    // A VDI's ref follows from its SR and volume key, as the toolstack makes it (no call per disk).
    const srUuid = await client.call(z.string(), "SR.get_uuid", disks.ref);
    const known = new Set(await client.call(z.array(z.string()), "SR.get_VDIs", disks.ref));
    const byKey = new Map(disks.keys.map((key) => [key, vdiRef(srUuid, key)] as const).filter(([, ref]) => known.has(ref)));
    const from = this.vms;
    await inParallel(from, size.vms, async (i) => {
      const vm = await client.call(z.string(), "VM.create", { name_label: `scale vm ${String(i).padStart(5, "0")}`, VCPUs_max: 2, VCPUs_at_startup: 2 });
      for (const device of [0, 1]) {
        const vdi = byKey.get(disks.keys[2 * i + device]!);
        if (vdi === undefined) throw new Error(`disk ${2 * i + device} of the VMs' SR has no VDI after SR.scan`);
        await client.call(z.string(), "VBD.create", { VM: vm, VDI: vdi, userdevice: String(device), type: "Disk", mode: "RW", bootable: device === 0 });
      }
    });
    this.vms = size.vms;
    log(`VMs: ${this.vms.toLocaleString("en")} (${(size.vms - from).toLocaleString("en")} made) in ${((Date.now() - started) / 1000).toFixed(0)} s so far`);
    const outcomes = ["success", "failure", "cancelled"] as const;
    await inParallel(this.tasks, size.tasks, async (i) => {
      const task = await client.call(z.string(), "task.create", `scale task ${i}`, `made by the scale bench (${i})`);
      await client.call(z.unknown(), "task.set_status", task, outcomes[i % 7 === 0 ? 1 : i % 13 === 0 ? 2 : 0]);
    });
    this.tasks = size.tasks;
    log(`tasks: ${this.tasks.toLocaleString("en")}; seeding took ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }

  async #makeSr(host: string, name: string): Promise<{ ref: string; path: string }> {
    const path = join(this.service.dataDir, "bench-srs", name);
    const ref = await this.service.client.call(z.string(), "SR.create", host, { path }, "0", name, "", "file", "user", false, {});
    return { ref, path };
  }
}

interface Measured {
  /** Per measure: the samples (ms). */
  ms: Map<string, number[]>;
  cpuMs: Map<string, number>;
  rss: number;
}

/** Each call `runs` times, one after the other: wall ms and the service's CPU ms per call. */
async function timeCalls(service: BenchService, runs: number, call: () => Promise<unknown>): Promise<{ ms: number[]; cpuMs: number }> {
  const ms: number[] = [];
  const before = service.cpu().own;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    await call();
    ms.push(performance.now() - started);
  }
  return { ms, cpuMs: ((service.cpu().own - before) * 1000) / runs };
}

/**
 * `watchers` clients wait in event.from on the VM class; one VM's description changes: ms from the change until
 * every watcher has returned with it.
 */
async function eventFanOut(service: BenchService, watchers: number, vm: string, round: number): Promise<number> {
  const { client } = service;
  const token = await client.call(z.string(), "event.get_current_id");
  const waiting = Array.from({ length: watchers }, async () => {
    for (let from = token; ; ) {
      const batch = await client.call(z.object({ token: z.string(), events: z.array(z.object({ ref: z.string() })) }), "event.from", ["vm"], from, 30);
      if (batch.events.some((event) => event.ref === vm)) return performance.now();
      from = batch.token;
    }
  });
  // Every watcher in its wait before the change.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const changed = performance.now();
  await client.call(z.unknown(), "VM.set_name_description", vm, `scale round ${round}`);
  const ends = await Promise.all(waiting);
  return Math.max(...ends) - changed;
}

async function openLoggedIn(browser: Browser, site: ConsoleService): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.addCookies([{ name: "hangar_session", value: site.cookieValue, url: site.url, httpOnly: true, sameSite: "Strict" }]);
  return context.newPage();
}

/** ms from `start` until `done` resolves. */
async function timed(start: () => Promise<unknown>, done: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await start();
  await done();
  return performance.now() - started;
}

async function measure(service: BenchService, site: ConsoleService, browser: Browser, size: Size, runs: number): Promise<Measured> {
  const ms = new Map<string, number[]>();
  const cpuMs = new Map<string, number>();
  const call = async (name: string, method: string, params: unknown[], times = runs) => {
    const prepared = prepareCall(service.url, "JSON-RPC", method, [service.client.session, ...params] as never);
    const result = await timeCalls(service, times, prepared);
    ms.set(name, result.ms);
    cpuMs.set(name, result.cpuMs);
    log(`${name}: p50 ${percentile(result.ms, 50).toFixed(0)} ms, service CPU ${result.cpuMs.toFixed(0)} ms/call`);
  };
  await call("VM.get_all_records", "VM.get_all_records", []);
  await call("task.get_all_records", "task.get_all_records", [], Math.max(3, Math.round(runs / 2)));
  await call("task.hangar_get_page, 100 finished tasks", "task.hangar_get_page", [{ limit: 100 }]);
  const [vm] = await service.client.call(z.array(z.string()), "VM.get_all");
  const fanOut: number[] = [];
  for (let round = 0; round < 3; round++) fanOut.push(await eventFanOut(service, size.watchers, vm!, round));
  ms.set("event.from", fanOut);
  log(`event.from, ${size.watchers} watchers: ${summarise(fanOut).median.toFixed(0)} ms`);

  const page = await openLoggedIn(browser, site);
  try {
    const vmCount = `${size.vms.toLocaleString("en")} VMs`;
    const pageMs = (name: string, values: number[]) => (ms.set(name, values), log(`${name}: p50 ${summarise(values).median.toFixed(0)} ms`));
    const load: number[] = [];
    const filter: number[] = [];
    for (let i = 0; i < runs; i++) {
      load.push(await timed(() => page.goto(`${site.url}/vms`), () => page.getByRole("list", { name: "VMs" }).getByRole("link").first().waitFor()));
      await page.getByText(vmCount, { exact: true }).first().waitFor();
      const name = `scale vm ${String((i * 7919) % size.vms).padStart(5, "0")}`;
      filter.push(await timed(() => page.getByRole("searchbox", { name: "Filter VMs by name" }).fill(name), () => page.getByText(`1 of ${vmCount}`, { exact: true }).first().waitFor()));
    }
    pageMs("VMs page: load until the list shows", load);
    pageMs("VMs page: filter by name until one is left", filter);
    // Seeded failures: every 7th task (failure(i) in Seeded.growTo).
    const failures = Math.ceil(size.tasks / 7);
    const tasksLoad: number[] = [];
    const tasksFilter: number[] = [];
    for (let i = 0; i < runs; i++) {
      tasksLoad.push(await timed(() => page.goto(`${site.url}/tasks`), () => page.getByRole("list", { name: "Finished tasks" }).getByRole("listitem").first().waitFor()));
      // The history says "<matching> of <all> finished tasks" once the toolstack's filtered page is in.
      tasksFilter.push(await timed(() => page.getByRole("combobox", { name: "Status" }).selectOption("failed"), () => page.getByText(new RegExp(`\\b${failures.toLocaleString("en")} of `)).first().waitFor()));
    }
    pageMs("Tasks page: load until the history shows", tasksLoad);
    pageMs("Tasks page: filter to the failed ones", tasksFilter);
  } finally {
    await page.context().close();
  }
  return { ms, cpuMs, rss: rssBytes(service.pid) };
}

const GROWTH: Record<string, number> = {
  "VM.get_all_records": LISTING_GROWTH,
  "task.get_all_records": LISTING_GROWTH,
  "task.hangar_get_page, 100 finished tasks": FLAT_GROWTH,
  "event.from": FLAT_GROWTH,
};

function rows(size: Size, base: Measured, full: Measured): Row[] {
  const out: Row[] = [];
  for (const [name, values] of full.ms) {
    const ours = summarise(values).median;
    const baseline = summarise(base.ms.get(name)!).median;
    const isPage = name.includes("page:");
    const growth = GROWTH[name];
    const fanOut = name === "event.from";
    const label = fanOut ? `event.from, ${size.watchers} watchers, until all have a VM's change` : name;
    // Every watcher is answered on its own connection: ten times the watchers is ten times the work. What must
    // not grow with the objects is the time per watcher.
    const ratio = fanOut ? ours / size.watchers / (baseline / (size.watchers / FACTOR)) : ours / baseline;
    out.push({
      measure: `${label}, ${size.vms.toLocaleString("en")} VMs, ${size.tasks.toLocaleString("en")} tasks`,
      ours: fanOut ? `${ours.toFixed(0)} ms p50 (${(ours / size.watchers).toFixed(2)} ms per watcher)` : `${ours.toFixed(0)} ms p50`,
      baseline: fanOut ? `${baseline.toFixed(0)} ms with ${size.watchers / FACTOR} watchers at a tenth (${(baseline / (size.watchers / FACTOR)).toFixed(2)} per watcher)` : `${baseline.toFixed(0)} ms at a tenth`,
      ratio,
      target: isPage ? `< ${PAGE_TARGET_MS} ms` : fanOut ? `≤ ${growth}× per watcher` : `≤ ${growth}× growth`,
      met: isPage ? ours < PAGE_TARGET_MS : ratio <= growth!,
      note: `runs ${Math.round(Math.min(...values))}–${Math.round(Math.max(...values))} ms${full.cpuMs.has(name) ? `; service CPU ${full.cpuMs.get(name)!.toFixed(0)} vs ${base.cpuMs.get(name)!.toFixed(0)} ms/call` : ""}`,
    });
  }
  out.push({
    measure: "the toolstack's RSS after the calls",
    ours: formatSize(full.rss),
    baseline: `${formatSize(base.rss)} at a tenth`,
    ratio: full.rss / base.rss,
    target: "",
    met: null,
    note: "VmRSS of `hangar serve` once the phase's calls and pages are done",
  });
  return out;
}

export async function run(): Promise<void> {
  const full = fullSize();
  const runs = Math.max(3, Math.round(positiveEnv("HANGAR_BENCH_RUNS", 5)));
  const workspace = openWorkspace("hangar-bench-scale");
  const started = Date.now();
  const table: Row[] = [];
  try {
    await workspace.withScratch("scale", async (scratch) => {
      const service = await startBenchService(join(scratch.disk, "data"));
      scratch.defer(() => service.stop());
      const seeded = new Seeded(service);
      log(`seeding a tenth: ${JSON.stringify(tenth(full))}`);
      await seeded.growTo(tenth(full));
      const site = await startConsole(service.url);
      scratch.defer(() => site.stop());
      const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
      scratch.defer(() => browser.close());
      const base = await measure(service, site, browser, tenth(full), runs);
      log(`growing to full size: ${JSON.stringify(full)}`);
      await seeded.growTo(full);
      const grown = await measure(service, site, browser, full, runs);
      table.push(...rows(full, base, grown));
    });
  } catch (error) {
    log(`failed: ${(error as Error).stack}`);
    table.push({ ...unavailableRow("scale ×10", "", (error as Error).message.slice(0, 300)), ours: "FAILED" });
    process.exitCode = 1;
  } finally {
    await workspace.close();
  }
  process.stdout.write(`${renderTable(`Hangar scale bench — ${full.vms.toLocaleString("en")} VMs, ${full.tasks.toLocaleString("en")} tasks, ${full.volumes.toLocaleString("en")} volumes over ${full.srs} SRs; ${runs} runs; ${((Date.now() - started) / 1000).toFixed(0)} s in all`, table)}\n`);
}
