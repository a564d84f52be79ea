// The export half of the transfers bench: a VM's export downloaded through the console
// (`GET /api/download/vm/<uuid>.xva`, streamed through its spool) against `curl` of the toolstack's
// `GET /export` itself, both uncompressed (the pipe is measured, not the compressor), interleaved; the console's
// RSS (its process tree) sampled during its downloads. A third download goes through socat, a byte relay in C
// with no HTTP and no spool: what any second process between curl and the toolstack leaves on this machine.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { freePort } from "../../server/free-port.ts";
import { http, patternBlock, testXva } from "../../server/toolstack/transfer/testing.ts";
import { parseXmlRpcValue } from "../../server/xenapi/xml-rpc.ts";
import type { ConsoleService } from "../console/console-service.ts";
import { formatSize, MiB, megabytesPerSecond, perGiB, summarise } from "../measure.ts";
import { endedChildrenCpuSeconds, runCommand, track } from "../processes.ts";
import { type Row, unavailableRow } from "../table.ts";
import type { BenchService } from "../toolstack/service.ts";
import { rssBytes, treeCpuSeconds } from "./process-tree.ts";

const TARGET_RATIO = 0.9;
const RSS_TARGET_MIB = 300;
const RELAY_MEASURE = "the same download through socat alone (a C byte relay: no HTTP, no spool; the most a second process in the path leaves here)";

/** Every block of the disk holds data (made when asked: the archive is never all in memory). */
export class PatternBlocks extends Map<number, Buffer> {
  override get(index: number): Buffer {
    return patternBlock(index);
  }
}

async function curlSeconds(url: string, headers: string[]): Promise<{ seconds: number; bytes: number }> {
  const result = await runCommand("curl", ["-sS", "-f", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", ...headers.flatMap((h) => ["-H", h]), url], { timeoutMs: 30 * 60_000 });
  const [bytes, seconds] = result.stdout.trim().split(" ").map(Number);
  return { seconds: seconds!, bytes: bytes! };
}

/** socat relaying a local port to `target` (1 MiB reads and writes); its CPU (with its forks', which it reaps). */
async function relay(target: URL): Promise<{ url: URL; cpu: () => number; stop: () => void }> {
  const port = await freePort();
  const child = track(spawn("socat", ["-b1048576", `TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork`, `TCP:${target.hostname}:${target.port}`], { stdio: ["ignore", "ignore", "pipe"] }));
  let errors = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (errors += text));
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(new Error(`socat could not run (${error.message}): apt-get install socat`)));
    child.once("exit", (code) => reject(new Error(`socat exited (${code}): ${errors.trim()}`)));
  });
  failed.catch(() => undefined);
  for (let i = 0; ; i++) {
    const listening = await new Promise<boolean>((resolve) => {
      const probe = createServer().once("error", () => resolve(true));
      probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(false)));
    });
    if (listening) break;
    if (i > 50) throw new Error("socat did not listen within 5 s");
    await Promise.race([delay(100), failed]);
  }
  const url = new URL(target);
  url.port = String(port);
  return { url, cpu: () => treeCpuSeconds(child.pid!), stop: () => child.kill() };
}

interface Download {
  rate: number;
  /** CPU seconds: the console's tree, the toolstack's own, curl's (reaped), and the relay's when there is one. */
  console: number;
  toolstack: number;
  curl: number;
  relay: number;
}

export async function benchExportDownload(service: BenchService, site: ConsoleService, sizeBytes: number, runs: number): Promise<Row[]> {
  const archive = testXva({ name: "bench export", disks: [{ size: sizeBytes, blocks: new PatternBlocks() }] });
  const imported = await http(`${service.url}import?session_id=${service.client.session}`, { method: "PUT", body: archive });
  const taskRef = String(imported.headers["task-id"] ?? "");
  const task = await service.client.waitTask(taskRef);
  if (task.status !== "success") throw new Error(`the import failed: ${JSON.stringify(task.error_info)}`);
  const [vmRef] = z.array(z.string()).parse(parseXmlRpcValue(task.result));
  const uuid = await service.client.call(z.string(), "VM.get_uuid", vmRef);

  const exportPath = `export?session_id=${service.client.session}&uuid=${uuid}&use_compression=false`;
  const socat = await relay(new URL(service.url)).catch((error: Error) => error);
  let bytes = 0;
  const timed = async (url: string, headers: string[], relayCpu: () => number = () => 0): Promise<Download> => {
    const before = { console: treeCpuSeconds(site.pid), toolstack: service.cpu().own, curl: endedChildrenCpuSeconds(), relay: relayCpu() };
    const got = await curlSeconds(url, headers);
    if (bytes !== 0 && got.bytes !== bytes) throw new Error(`${url} sent ${got.bytes} bytes, the toolstack's export ${bytes}`);
    bytes = got.bytes;
    return {
      rate: megabytesPerSecond(got.bytes, got.seconds),
      console: treeCpuSeconds(site.pid) - before.console,
      toolstack: service.cpu().own - before.toolstack,
      curl: endedChildrenCpuSeconds() - before.curl,
      relay: relayCpu() - before.relay,
    };
  };
  const direct = () => timed(`${service.url}${exportPath}`, []);

  const through = () => timed(`${site.url}/api/download/vm/${uuid}.xva?compression=none`, [`cookie: ${site.cookie}`]);
  const ours: Download[] = [];
  const baseline: Download[] = [];
  const bare: Download[] = [];
  let peakRss = 0;
  const idleRss = rssBytes(site.pid);
  try {
    await direct();
    await through(); // warm: the route's first load
    for (let i = 0; i < runs; i++) {
      baseline.push(await direct());
      if (!(socat instanceof Error)) bare.push(await timed(`${socat.url.href}${exportPath}`, [], socat.cpu));
      const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssBytes(site.pid))), 100);
      ours.push(await through().finally(() => clearInterval(sampler)));
    }
  } finally {
    if (!(socat instanceof Error)) socat.stop();
  }
  const rate = (list: Download[]) => summarise(list.map((d) => d.rate)).median;
  const cpu = (list: Download[], party: "console" | "toolstack" | "curl" | "relay") => perGiB(list.map((d) => d[party]), bytes);
  const ratio = rate(ours) / rate(baseline);
  return [
    {
      measure: `export download through the console, ${formatSize(bytes)} XVA (disk ${formatSize(sizeBytes)}, uncompressed)`,
      ours: `${rate(ours).toFixed(0)} MB/s`,
      baseline: `${rate(baseline).toFixed(0)} MB/s curl of /export`,
      ratio,
      target: `≥ ${TARGET_RATIO}×`,
      met: ratio >= TARGET_RATIO,
      note: `${runs} runs each, interleaved; every byte also written to the console's spool; CPU s/GiB: console ${cpu(ours, "console")}, toolstack ${cpu(ours, "toolstack")}, curl ${cpu(ours, "curl")} (curl of /export: toolstack ${cpu(baseline, "toolstack")}, curl ${cpu(baseline, "curl")})`,
    },
    socat instanceof Error
      ? unavailableRow(RELAY_MEASURE, "—", socat.message)
      : {
          measure: RELAY_MEASURE,
          ours: `${rate(bare).toFixed(0)} MB/s`,
          baseline: `${rate(baseline).toFixed(0)} MB/s curl of /export`,
          ratio: rate(bare) / rate(baseline),
          target: "—",
          met: null,
          note: `${runs} runs, between the two above; CPU s/GiB: socat ${cpu(bare, "relay")}, curl ${cpu(bare, "curl")}, toolstack ${cpu(bare, "toolstack")}; the console's download reaches ${((rate(ours) / rate(bare)) * 100).toFixed(0)}% of it`,
        },
    {
      measure: "console RSS during the export downloads",
      ours: `${(peakRss / MiB).toFixed(0)} MiB peak`,
      baseline: `${(idleRss / MiB).toFixed(0)} MiB before`,
      ratio: null,
      target: `< ${RSS_TARGET_MIB} MiB`,
      met: peakRss < RSS_TARGET_MIB * MiB,
      note: "next start and its children, sampled every 100 ms",
    },
  ];
}
