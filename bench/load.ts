// The load suite (`npm run bench -- load`): 200 XenAPI callers at once, each a session of its own calling
// every 2–8 s (mostly reads, some VDI listings and VDI.create + VDI.destroy pairs), while 50 small XVAs are uploaded
// through the console at the same moment (tus, 8 MiB chunks, as the VMs page sends them) and imported. The
// toolstack and the console's production build run in processes of their own. Baseline: the same reads from
// one caller on the idle service, in the same run. Every object made is accounted for at the end.
// HANGAR_BENCH_SCALE scales the callers and uploads (default 200 and 50).
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { Upload } from "tus-js-client";
import { z } from "zod";
import { XenApiClient } from "../server/xenapi/client.ts";
import { ROOT_PASSWORD } from "../server/toolstack/testing.ts";
import { collect, MiB, patternBlock, testXva } from "../server/toolstack/transfer/testing.ts";
import { startConsole } from "./console/console-service.ts";
import { positiveEnv } from "./measure.ts";
import { rssBytes, schedSeconds } from "./processes.ts";
import { renderTable, type Row } from "./table.ts";
import { type BenchService, percentile, startBenchService } from "./toolstack/service.ts";
import { openWorkspace } from "./workspace.ts";

/** Reads the toolstack answers from its own database: what a console or Xen Orchestra polls. */
const READS: ReadonlyArray<readonly [string, (sr: string) => unknown[]]> = [
  ["VM.get_all_records", () => []],
  ["SR.get_all_records", () => []],
  ["host.get_all_records", () => []],
  ["pool.get_all_records", () => []],
  ["SR.get_record", (sr) => [sr]],
  ["task.get_all_records", () => []],
];
/** A read that lists the SR through its plugin (one SR.ls exec each time): measured apart, it costs a process. */
const LISTING = "VDI.get_all";
/** Share of a caller's calls that list VDIs, and that create a VDI and destroy it again. */
const LISTING_SHARE = 0.1;
const WRITE_SHARE = 0.1;
/** A caller's pause between calls, ms: a console tab or a script polling every few seconds. */
const THINK_MS = [2000, 8000] as const;
/** Reads p99 is taken over windows of this length, so that "throughout" means every window. */
const WINDOW_MS = 5000;
const P99_TARGET_MS = 50;
/**
 * Where the machine itself cannot answer within P99_TARGET_MS (the no-op peer's worst window over it), the target
 * is re-stated against that peer, in the same run: at most this many times its worst window.
 */
const PEER_ALLOWANCE = 1.5;

interface Timed {
  at: number;
  ms: number;
  what?: string;
  /** The service's own time over the call (its Server-Timing answer). */
  serviceMs?: number;
}

async function timed<T>(samples: Timed[], work: () => Promise<T>): Promise<T> {
  const at = performance.now();
  const result = await work();
  samples.push({ at, ms: performance.now() - at });
  return result;
}

/** A read as a JSON-RPC client makes it, timed from here and by the service (Server-Timing). */
async function timedRead(samples: Timed[], client: XenApiClient, method: string, params: unknown[]): Promise<void> {
  const at = performance.now();
  const answer = await fetch(new URL("jsonrpc", client.url.endsWith("/") ? client.url : `${client.url}/`), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", method, params: [client.session, ...params], id: 1 }),
  });
  const reply = z.object({ result: z.unknown().optional(), error: z.unknown().optional() }).parse(await answer.json());
  if (reply.error !== undefined) throw new Error(`${method}: ${JSON.stringify(reply.error)}`);
  const serviceMs = Number(/dur=([\d.]+)/.exec(answer.headers.get("server-timing") ?? "")?.[1] ?? Number.NaN);
  samples.push({ at, ms: performance.now() - at, what: method, serviceMs });
}

/**
 * A JSON-RPC peer that does nothing (a Node process answering every POST at once, as niced as the toolstack):
 * what any service on this machine answers its callers in, under the same load.
 */
async function startNoopPeer(): Promise<{ url: string; stop(): void }> {
  const code = `const server = require("node:http").createServer((req, res) => { req.resume(); req.on("end", () => { res.setHeader("content-type", "application/json"); res.end('{"jsonrpc":"2.0","result":"OK","id":1}'); }); });
server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"));`;
  const child = spawn(process.execPath, ["-e", code], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(child.stdout, "data")) as [Buffer];
  return { url: `http://127.0.0.1:${Number(line.toString())}/jsonrpc`, stop: () => void child.kill() };
}

/** One call to the no-op peer. */
async function callNoop(url: string): Promise<unknown> {
  const answer = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", method: "noop", params: [], id: 1 }) });
  return answer.json();
}

const count = async (client: XenApiClient, cls: string) => (await client.call(z.array(z.string()), `${cls}.get_all`)).length;

/** A VDI's worth of arguments on `sr`: small and thin. */
const vdiArgs = (sr: string, n: number) => ({ SR: sr, virtual_size: 4 * MiB, name_label: `load ${n}`, name_description: "", type: "user", sharable: false, read_only: false, other_config: {} });

/** One tus upload of `data` through the console, as the VMs page sends it. */
function upload(consoleUrl: string, cookie: string, name: string, data: Buffer, sr: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const job = new Upload(data, {
      endpoint: `${consoleUrl}/api/upload`,
      chunkSize: 8 * MiB,
      retryDelays: [500, 1000, 3000],
      uploadSize: data.length,
      headers: { cookie },
      metadata: { filename: `${name}.xva`, filetype: "application/octet-stream", sr, lastModified: String(Date.now()) },
      onSuccess: () => resolve(),
      onError: reject,
    });
    job.start();
  });
}

/** The console's import tasks of an uploaded file (`VM import: <file>`; a broken stream is imported again under a new one). */
async function importTasks(client: XenApiClient, name: string): Promise<Array<{ status: string; error_info: string[] }>> {
  const tasks = await client.call(z.array(z.string()), "task.get_by_name_label", `VM import: ${name}.xva`);
  return Promise.all(tasks.map((task) => client.call(z.looseObject({ status: z.string(), error_info: z.array(z.string()) }), "task.get_record", task)));
}

const describeTasks = (tasks: Array<{ status: string; error_info: string[] }>) => tasks.map((task) => `${task.status} ${task.error_info.join(" ")}`.trim()).join(", ") || "none";

/** Waits until an import task of the file uploaded as `name` has succeeded and its VM is there. */
async function imported(client: XenApiClient, name: string, deadline: number): Promise<void> {
  for (;;) {
    const tasks = await importTasks(client, name);
    const [vm] = await client.call(z.array(z.string()), "VM.get_by_name_label", name);
    if (tasks.some((task) => task.status === "success") && vm !== undefined) return;
    if (Date.now() > deadline) throw new Error(`${name} was not imported within the time allowed; its import tasks: ${describeTasks(tasks)}`);
    await sleep(500);
  }
}

export async function run(): Promise<void> {
  const scale = positiveEnv("HANGAR_BENCH_SCALE", 1);
  const callers = Math.max(2, Math.round(200 * scale));
  const uploads = Math.max(1, Math.round(50 * scale));
  const workspace = openWorkspace("hangar-bench-load");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    await workspace.withScratch("load", async (scratch) => {
      const service: BenchService = await startBenchService(join(scratch.disk, "data"));
      scratch.defer(() => service.stop());
      const site = await startConsole(service.url);
      scratch.defer(() => site.stop());
      const noop = await startNoopPeer();
      scratch.defer(() => noop.stop());
      const root = service.client;
      const [pool] = await root.call(z.array(z.string()), "pool.get_all");
      const sr = await root.call(z.string(), "pool.get_default_SR", pool);
      const pick = (n: number) => READS[n % READS.length]!;

      // The baseline: the same reads, one caller, nothing else running.
      const idle: Timed[] = [];
      for (let n = 0; n < 20 * READS.length; n++) await timed(idle, () => root.call(z.unknown(), pick(n)[0], ...pick(n)[1](sr)));
      const idleListings: Timed[] = [];
      for (let n = 0; n < 20; n++) await timed(idleListings, () => root.call(z.unknown(), LISTING));

      const archives = await Promise.all(
        Array.from({ length: uploads }, (_, n) => collect(testXva({ name: `load upload ${n}`, disks: [{ size: 8 * MiB, blocks: new Map([[0, patternBlock(n)], [7, patternBlock(1000 + n)]]) }] }))),
      );
      const before = { vms: await count(root, "VM"), vdis: await count(root, "VDI") };
      process.stderr.write(`[bench load] ${callers} callers logging in...\n`);
      const clients = await Promise.all(Array.from({ length: callers }, () => XenApiClient.login(service.url, "root", ROOT_PASSWORD, "hangar-bench-load")));

      const reads: Timed[] = [];
      const noops: Timed[] = [];
      const listings: Timed[] = [];
      const writes: Timed[] = [];
      const errors: string[] = [];
      let made = 0;
      let destroyed = 0;
      let running = true;
      // The generator's own event loop: a stall here would be counted as the service's latency.
      const generatorDelay = monitorEventLoopDelay({ resolution: 10 });
      generatorDelay.enable();
      const rss = { toolstack: 0, console: 0 };
      const sampler = setInterval(() => {
        rss.toolstack = Math.max(rss.toolstack, rssBytes(service.pid) / MiB);
        rss.console = Math.max(rss.console, rssBytes(site.pid) / MiB);
      }, 500);
      const loops = clients.map(async (client, caller) => {
        const think = () => sleep(THINK_MS[0] + Math.random() * (THINK_MS[1] - THINK_MS[0]));
        // Spread over the first pause.
        await sleep(Math.random() * THINK_MS[1]);
        for (let n = caller; running; n++) {
          const dice = Math.random();
          try {
            if (dice < LISTING_SHARE) await timed(listings, () => client.call(z.unknown(), LISTING));
            else if (dice < LISTING_SHARE + WRITE_SHARE) {
              await timed(writes, async () => {
                const vdi = await client.call(z.string(), "VDI.create", vdiArgs(sr, n));
                made++;
                await client.call(z.unknown(), "VDI.destroy", vdi);
                destroyed++;
              });
            } else {
              const [method, params] = pick(n);
              await timedRead(reads, client, method, params(sr));
              await timed(noops, () => callNoop(noop.url));
            }
          } catch (error) {
            errors.push((error as Error).message);
          }
          await think();
        }
      });

      process.stderr.write(`[bench load] ${uploads} uploads through the console...\n`);
      const loadStarted = performance.now();
      const cpuBefore = { ...service.cpu(), console: site.cpu(), generator: process.cpuUsage(), loop: schedSeconds(service.pid) };
      await sleep(2000);
      const uploadStarted = performance.now();
      const uploadErrors: string[] = [];
      await Promise.all(archives.map((data, n) => upload(site.url, site.cookie, `load upload ${n}`, data, sr).catch((error: unknown) => void uploadErrors.push((error as Error).message))));
      const uploaded = performance.now();
      const deadline = Date.now() + 5 * 60_000;
      await Promise.all(archives.map((_, n) => imported(root, `load upload ${n}`, deadline).catch((error: unknown) => void uploadErrors.push((error as Error).message))));
      const ready = performance.now();
      // At least 30 s of load, whatever the uploads took.
      await sleep(Math.max(0, 30_000 - (ready - loadStarted)));
      running = false;
      await Promise.all(loops);
      clearInterval(sampler);
      generatorDelay.disable();
      const loadSeconds = (performance.now() - loadStarted) / 1000;
      const cpuAfter = { ...service.cpu(), console: site.cpu(), loop: schedSeconds(service.pid) };
      const generatorCpu = process.cpuUsage(cpuBefore.generator);
      const cpuNote = `CPU seconds over the ${loadSeconds.toFixed(0)} s of load: toolstack ${(cpuAfter.own - cpuBefore.own).toFixed(1)}, its plugin processes ${(cpuAfter.plugins - cpuBefore.plugins).toFixed(1)} (those ended), console ${(cpuAfter.console - cpuBefore.console).toFixed(1)}, callers ${((generatorCpu.user + generatorCpu.system) / 1e6).toFixed(1)}; the toolstack's event-loop thread ${(cpuAfter.loop.running - cpuBefore.loop.running).toFixed(1)} s on a core and ${(cpuAfter.loop.waiting - cpuBefore.loop.waiting).toFixed(1)} s runnable waiting for one`;
      await Promise.all(clients.map((client) => client.logout()));

      // An upload whose VM went after it was seen imported: what its import tasks say.
      const lost: string[] = [];
      for (let n = 0; n < uploads; n++) {
        const name = `load upload ${n}`;
        if ((await root.call(z.array(z.string()), "VM.get_by_name_label", name)).length !== 1) lost.push(`${name}: ${describeTasks(await importTasks(root, name))}`);
      }
      // An import's VM is whole before its task has ended (its disks are still being released): up to a minute.
      const pendingTasks = async () => Object.values(await root.records("task", z.looseObject({ status: z.string() }))).filter((task) => task.status === "pending").length;
      let pending = await pendingTasks();
      for (const settle = Date.now() + 60_000; pending > 0 && Date.now() < settle; pending = await pendingTasks()) await sleep(500);
      const after = { vms: await count(root, "VM"), vdis: await count(root, "VDI") };
      const worstWindow = (ms: (sample: Timed) => number | undefined, samples = reads) => {
        const windows = new Map<number, number[]>();
        for (const sample of samples) {
          const value = ms(sample);
          if (value === undefined || !Number.isFinite(value)) continue;
          const window = Math.floor((sample.at - loadStarted) / WINDOW_MS);
          windows.set(window, [...(windows.get(window) ?? []), value]);
        }
        const p99s = [...windows].map(([window, values]) => ({ at: window * (WINDOW_MS / 1000), p99: percentile(values, 99) }));
        const worst = p99s.reduce((a, b) => (b.p99 > a.p99 ? b : a));
        return { count: windows.size, p99: worst.p99, at: worst.at, all: p99s.sort((a, b) => a.at - b.at) };
      };
      const { count: windowCount, p99: worst, at: worstAt, all: windowP99s } = worstWindow((sample) => sample.ms);
      const serviceWorst = worstWindow((sample) => sample.serviceMs).p99;
      const noopWindows = worstWindow((sample) => sample.ms, noops);
      const idleP99 = percentile(idle.map((s) => s.ms), 99);
      const targetMs = Math.max(P99_TARGET_MS, PEER_ALLOWANCE * noopWindows.p99);
      const target = targetMs === P99_TARGET_MS ? `< ${P99_TARGET_MS} ms` : `< ${targetMs.toFixed(0)} ms (${PEER_ALLOWANCE} × the no-op peer's worst window, over ${P99_TARGET_MS} ms)`;
      const readMs = reads.map((s) => s.ms);
      const byMethod = READS.map(([method]) => `${method} ${percentile(reads.filter((s) => s.what === method).map((s) => s.ms), 99).toFixed(0)}`).join(", ");
      const writeMs = writes.map((s) => s.ms);
      const calls = reads.length + listings.length + writes.length;
      rows.push(
        {
          measure: `XenAPI reads from the toolstack's database, ${callers} callers (one call each every ${THINK_MS[0] / 1000}–${THINK_MS[1] / 1000} s) + ${uploads} console uploads: worst p99 of any ${WINDOW_MS / 1000} s window`,
          ours: `${worst.toFixed(1)} ms`,
          baseline: `${idleP99.toFixed(1)} ms p99, one caller on the idle service`,
          ratio: worst / idleP99,
          target,
          met: worst < targetMs,
          note: `${windowCount} windows, the worst from +${worstAt} s (p99 ms by window: ${windowP99s.map((w) => w.p99.toFixed(0)).join(" ")}); overall p50 ${percentile(readMs, 50).toFixed(1)} ms, p99 ${percentile(readMs, 99).toFixed(1)} ms; ${reads.length} reads in ${loadSeconds.toFixed(0)} s; p99 ms by method: ${byMethod}; the generator's own event-loop delay p99 ${(generatorDelay.percentile(99) / 1e6).toFixed(0)} ms, max ${(generatorDelay.max / 1e6).toFixed(0)} ms`,
        },
        {
          measure: "a no-op JSON-RPC peer (a Node process answering at once) called by the same callers after each read: worst p99 of any window",
          ours: `${noopWindows.p99.toFixed(1)} ms`,
          baseline: "",
          ratio: null,
          target: "(the ceiling)",
          met: null,
          note: `the worst from +${noopWindows.at} s (p99 ms by window: ${noopWindows.all.map((w) => w.p99.toFixed(0)).join(" ")}); overall p50 ${percentile(noops.map((s) => s.ms), 50).toFixed(1)} ms, p99 ${percentile(noops.map((s) => s.ms), 99).toFixed(1)} ms; ${noops.length} calls: what any service's callers see on this machine under this load`,
        },
        {
          measure: "the same reads, the service's own time over each (its Server-Timing answer): worst p99 of any window",
          ours: `${serviceWorst.toFixed(1)} ms`,
          baseline: "",
          ratio: null,
          target,
          met: serviceWorst < targetMs,
          note: `overall p99 ${percentile(reads.flatMap((s) => (s.serviceMs === undefined || !Number.isFinite(s.serviceMs) ? [] : [s.serviceMs])), 99).toFixed(1)} ms; ${cpuNote}`,
        },
        {
          measure: `${LISTING} (one SR.ls through the plugin each) under the same load`,
          ours: `${percentile(listings.map((s) => s.ms), 99).toFixed(0)} ms p99`,
          baseline: `${percentile(idleListings.map((s) => s.ms), 99).toFixed(0)} ms p99 on the idle service`,
          ratio: percentile(listings.map((s) => s.ms), 99) / percentile(idleListings.map((s) => s.ms), 99),
          target: "",
          met: null,
          note: `p50 ${percentile(listings.map((s) => s.ms), 50).toFixed(0)} ms (idle ${percentile(idleListings.map((s) => s.ms), 50).toFixed(0)} ms); ${listings.length} listings`,
        },
        {
          measure: "VDI.create + VDI.destroy under the same load",
          ours: `${percentile(writeMs, 50).toFixed(0)} ms p50`,
          baseline: "",
          ratio: null,
          target: "",
          met: null,
          note: `p99 ${percentile(writeMs, 99).toFixed(0)} ms; ${writes.length} pairs (each two plugin calls)`,
        },
        {
          measure: "XenAPI calls that failed under load",
          ours: `${errors.length} of ${calls}`,
          baseline: "",
          ratio: null,
          target: "0",
          met: errors.length === 0,
          note: errors.length === 0 ? "" : [...new Set(errors)].slice(0, 3).join("; "),
        },
        {
          measure: `${uploads} XVAs (8 MiB disks) uploaded at once through the console and imported`,
          ours: `${uploads - uploadErrors.length} of ${uploads}`,
          baseline: "",
          ratio: null,
          target: `${uploads} of ${uploads}`,
          met: uploadErrors.length === 0,
          note: `last byte after ${((uploaded - uploadStarted) / 1000).toFixed(1)} s, all imported after ${((ready - uploadStarted) / 1000).toFixed(1)} s; peak RSS toolstack ${rss.toolstack.toFixed(0)} MiB, console ${rss.console.toFixed(0)} MiB${uploadErrors.length === 0 ? "" : `; ${[...new Set(uploadErrors)].slice(0, 4).join("; ")}`}`,
        },
        {
          measure: "objects accounted for afterwards",
          ours: `VMs +${after.vms - before.vms}, VDIs +${after.vdis - before.vdis}, callers' VDIs ${made} made / ${destroyed} destroyed, ${pending} tasks pending`,
          baseline: "",
          ratio: null,
          target: `VMs +${uploads}, VDIs +${uploads}, made = destroyed, 0 pending`,
          met: after.vms - before.vms === uploads && after.vdis - before.vdis === uploads && made === destroyed && pending === 0,
          note: lost.slice(0, 3).join("; "),
        },
      );
    });
  } finally {
    await workspace.close();
  }
  process.stdout.write(`${renderTable(`Hangar load bench — ${((Date.now() - started) / 1000).toFixed(0)} s in all`, rows)}\n`);
}
