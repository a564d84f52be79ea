// The console suite (`npm run bench -- console`): the SR page with 10,000 volumes — the tRPC listing behind it
// and, in Chromium, the time until the table shows them and until it answers a sort — and the dashboard with
// 20 SRs. The toolstack (`hangar serve`) and the console's production build (`next start`) run in processes
// of their own over a data dir of the run, so their CPU per request comes from /proc. Baselines, measured in
// the same run: the plugin's SR.ls exec (the floor of any volume listing) and XenAPI SR.get_all_records (what
// the SR list is made of).
import { join } from "node:path";
import { chromium, type Browser, type Page } from "@playwright/test";
import { z } from "zod";
import { formatBytes } from "../lib/format.ts";
import { srUri } from "../server/plugins/uris.ts";
import { type ConsoleService, startConsole, trpcQuery } from "./console/console-service.ts";
import { positiveEnv, spread, summarise, timeSeconds } from "./measure.ts";
import { DBG, pluginClient, VOLUME_PLUGIN } from "./storage/plugins.ts";
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { bigSrVolumeSize, createBigSr } from "./toolstack/big-sr.ts";
import { type BenchService, percentile, startBenchService } from "./toolstack/service.ts";
import { openWorkspace } from "./workspace.ts";

const LIST_TARGET_MS = 300;
/** volumes.list at most this many times the SR.ls exec it runs (the console's own share on top of it). */
const LIST_OVER_LS = 1.3;
const SORT_TARGET_MS = 1500;
const DASHBOARD_SRS = 20;

interface Sizes {
  volumes: number;
  runs: number;
}

function sizes(): Sizes {
  const scale = positiveEnv("HANGAR_BENCH_SCALE", 1);
  return { volumes: Math.max(100, Math.round(10_000 * scale)), runs: Math.max(3, Math.round(positiveEnv("HANGAR_BENCH_RUNS", 7))) };
}

/** Milliseconds and the console's CPU milliseconds of each of `runs` calls of `work`, one after the other. */
async function measureCalls(site: ConsoleService, runs: number, work: () => Promise<unknown>): Promise<{ ms: number[]; cpuMs: number[] }> {
  const ms: number[] = [];
  const cpuMs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const cpu = site.cpu();
    ms.push((await timeSeconds(work)) * 1000);
    cpuMs.push((site.cpu() - cpu) * 1000);
  }
  return { ms, cpuMs };
}

async function openLoggedIn(browser: Browser, site: ConsoleService): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.addCookies([{ name: "hangar_session", value: site.cookieValue, url: site.url, httpOnly: true, sameSite: "Strict" }]);
  return context.newPage();
}

async function benchVolumes(service: BenchService, site: ConsoleService, browser: Browser, s: Sizes): Promise<Row[]> {
  const big = await createBigSr(service, "big", s.volumes);
  const plugin = pluginClient("volume", VOLUME_PLUGIN);
  const ls = () => plugin.call("SR.ls", { dbg: DBG, sr: srUri(big.path) });
  const list = async () => {
    const answer = z.object({ volumes: z.array(z.unknown()) }).parse(await trpcQuery(site, "volumes.list", { srRef: big.ref }));
    if (answer.volumes.length !== s.volumes) throw new Error(`volumes.list answered ${answer.volumes.length} volumes, expected ${s.volumes}`);
  };
  await list(); // warm: the route's first compile-free run, the registry scan
  const lsMs: number[] = [];
  const ours: { ms: number[]; cpuMs: number[] } = { ms: [], cpuMs: [] };
  for (let i = 0; i < s.runs; i++) {
    const one = await measureCalls(site, 1, list);
    ours.ms.push(...one.ms);
    ours.cpuMs.push(...one.cpuMs);
    lsMs.push((await timeSeconds(ls)) * 1000);
  }
  const p50 = percentile(ours.ms, 50);
  const floor = summarise(lsMs).median;
  const rows: Row[] = [
    {
      measure: `volumes.list over HTTP (tRPC), an SR of ${s.volumes.toLocaleString("en")} volumes`,
      ours: `${p50.toFixed(0)} ms p50, ${percentile(ours.ms, 99).toFixed(0)} ms max`,
      baseline: `${floor.toFixed(0)} ms SR.ls exec of the SR`,
      ratio: p50 / floor,
      target: `< ${LIST_TARGET_MS} ms`,
      met: p50 < LIST_TARGET_MS,
      note: `${ours.ms.length} calls; console CPU ${summarise(ours.cpuMs).median.toFixed(0)} ms/call (the SR.ls it runs is a process of its own)`,
    },
    {
      // The call runs that exec and waits for it: where the exec alone takes more than the target, the target
      // is the console's own share on top of it.
      measure: "  (re-stated: against the SR.ls exec it runs, measured alternately)",
      ours: `${p50.toFixed(0)} ms p50`,
      baseline: `${floor.toFixed(0)} ms SR.ls exec`,
      ratio: p50 / floor,
      target: `≤ ${LIST_OVER_LS}×`,
      met: p50 / floor <= LIST_OVER_LS,
      note: `the console's share ${(p50 - floor).toFixed(0)} ms (parse and check the answer, rows, tRPC, HTTP); SR.ls spread ${spread(summarise(lsMs))} ms`,
    },
  ];

  // Chromium: a fresh load of the SR page until the table says how many volumes it holds, then one click on
  // "Sort by size" until the header says how it sorts and the first row holds the smallest (or biggest) size.
  const page = await openLoggedIn(browser, site);
  const count = `${s.volumes.toLocaleString("en")} volumes`;
  const volumeSizes = Array.from({ length: s.volumes }, (_, i) => bigSrVolumeSize(i));
  const extremes = { ascending: formatBytes(Math.min(...volumeSizes)), descending: formatBytes(Math.max(...volumeSizes)) };
  const loadMs: number[] = [];
  const sortMs: number[] = [];
  const cpuMs: number[] = [];
  for (let i = 0; i < s.runs; i++) {
    const loadStarted = performance.now();
    await page.goto(`${site.url}/storage/${big.ref}`);
    await page.getByText(count, { exact: true }).waitFor({ timeout: 60_000 });
    await page.getByRole("table", { name: "Volumes" }).getByRole("row").nth(1).waitFor();
    loadMs.push(performance.now() - loadStarted);
    const sort = page.getByRole("button", { name: "Sort by size" });
    const cpu = site.cpu();
    const started = performance.now();
    await sort.click();
    await page.waitForFunction(
      (expected: Record<string, string>) => {
        const header = [...document.querySelectorAll("th")].find((th) => th.textContent?.startsWith("Size"));
        const order = header?.getAttribute("aria-sort");
        const first = document.querySelector("table[aria-label='Volumes'] tbody tr:not([aria-hidden])");
        return order !== null && order !== undefined && order in expected && first?.textContent?.includes(expected[order]!) === true;
      },
      extremes,
      { polling: "raf", timeout: 30_000 },
    );
    sortMs.push(performance.now() - started);
    cpuMs.push((site.cpu() - cpu) * 1000);
  }
  await page.context().close();
  const sortP50 = summarise(sortMs).median;
  rows.push(
    {
      measure: `SR page in Chromium: load until the table shows ${count}`,
      ours: `${summarise(loadMs).median.toFixed(0)} ms p50`,
      baseline: "",
      ratio: null,
      target: "",
      met: null,
      note: `${loadMs.length} loads at 1280×900; includes the page, the SR header, the charts' first answer and volumes.list`,
    },
    {
      measure: `SR page in Chromium: click "Sort by size" until the rows are sorted, ${count}`,
      ours: `${sortP50.toFixed(0)} ms p50, ${Math.max(...sortMs).toFixed(0)} ms max`,
      baseline: "",
      ratio: null,
      target: `< ${SORT_TARGET_MS} ms`,
      met: sortP50 < SORT_TARGET_MS,
      note: `sorted in the browser (console CPU ${summarise(cpuMs).median.toFixed(0)} ms meanwhile: no request); only the rows in view are in the DOM`,
    },
  );
  return rows;
}

async function benchDashboard(service: BenchService, site: ConsoleService, browser: Browser, s: Sizes, scratch: string): Promise<Row[]> {
  const { client } = service;
  const [host] = await client.call(z.array(z.string()), "host.get_all");
  const existing = (await client.call(z.array(z.string()), "SR.get_all")).length;
  for (let i = existing; i < DASHBOARD_SRS; i++) {
    await client.call(z.string(), "SR.create", host, { path: join(scratch, `sr-${i}`) }, "0", `bench SR ${i}`, "", "file", "user", false, {});
  }
  const srCount = (await client.call(z.array(z.string()), "SR.get_all")).length;
  const srsList = () => trpcQuery(site, "srs.list");
  const xapiList = () => client.call(z.record(z.string(), z.unknown()), "SR.get_all_records");
  await srsList();
  const ours: number[] = [];
  const cpuMs: number[] = [];
  const baseline: number[] = [];
  for (let i = 0; i < s.runs; i++) {
    const one = await measureCalls(site, 1, srsList);
    ours.push(...one.ms);
    cpuMs.push(...one.cpuMs);
    baseline.push((await timeSeconds(xapiList)) * 1000);
  }
  const p50 = percentile(ours, 50);
  const floor = summarise(baseline).median;

  const page = await openLoggedIn(browser, site);
  const loadMs: number[] = [];
  for (let i = 0; i < s.runs; i++) {
    const started = performance.now();
    await page.goto(`${site.url}/`);
    await page.getByText(`All ${srCount} SRs are Healthy.`).waitFor({ timeout: 60_000 });
    loadMs.push(performance.now() - started);
  }
  await page.context().close();
  return [
    {
      measure: `srs.list over HTTP (tRPC), ${srCount} SRs`,
      ours: `${p50.toFixed(0)} ms p50`,
      baseline: `${floor.toFixed(0)} ms XenAPI SR.get_all_records`,
      ratio: p50 / floor,
      target: "",
      met: null,
      note: `console CPU ${summarise(cpuMs).median.toFixed(0)} ms/call; each SR's volume count is one SR.ls`,
    },
    {
      measure: `Dashboard in Chromium, ${srCount} SRs: load until the health summary shows`,
      ours: `${summarise(loadMs).median.toFixed(0)} ms p50`,
      baseline: "",
      ratio: null,
      target: "",
      met: null,
      note: `${loadMs.length} loads at 1280×900`,
    },
  ];
}

export async function run(): Promise<void> {
  const s = sizes();
  const workspace = openWorkspace("hangar-bench-console");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    await workspace.withScratch("console", async (scratch) => {
      const service = await startBenchService(join(scratch.disk, "data"));
      scratch.defer(() => service.stop());
      const site = await startConsole(service.url);
      scratch.defer(() => site.stop());
      const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"] });
      scratch.defer(() => browser.close());
      const sections: Array<[string, string, () => Promise<Row[]>]> = [
        ["SR page, 10,000 volumes", `< ${LIST_TARGET_MS} ms, < ${SORT_TARGET_MS} ms`, () => benchVolumes(service, site, browser, s)],
        [`dashboard, ${DASHBOARD_SRS} SRs`, "", () => benchDashboard(service, site, browser, s, join(scratch.disk, "srs"))],
      ];
      for (const [name, target, bench] of sections) {
        const sectionStarted = Date.now();
        process.stderr.write(`[bench console] ${name}...\n`);
        try {
          rows.push(...(await bench()));
        } catch (error) {
          process.stderr.write(`[bench console] ${name} failed: ${(error as Error).stack}\n`);
          rows.push({ ...unavailableRow(name, target, (error as Error).message), ours: "FAILED" });
        }
        process.stderr.write(`[bench console] ${name}: ${((Date.now() - sectionStarted) / 1000).toFixed(0)} s\n`);
      }
    });
  } finally {
    await workspace.close();
  }
  const title = `Hangar console bench — ${s.volumes.toLocaleString("en")} volumes, ${s.runs} runs, ${((Date.now() - started) / 1000).toFixed(0)} s in all`;
  process.stdout.write(`${renderTable(title, rows)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
