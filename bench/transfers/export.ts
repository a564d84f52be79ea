// The export half of the transfers bench: a VM's export downloaded through the console
// (`GET /api/download/vm/<uuid>.xva`, streamed through its spool) against `curl` of the toolstack's
// `GET /export` itself, both uncompressed (the pipe is measured, not the compressor), interleaved; the console's
// RSS (its process tree) sampled during its downloads.
import { z } from "zod";
import { http, patternBlock, testXva } from "../../server/toolstack/vm-transfer/testing.ts";
import { parseXmlRpcValue } from "../../server/toolstack/xenapi/xml-rpc.ts";
import type { ConsoleService } from "../console/console-service.ts";
import { formatSize, MiB, megabytesPerSecond, summarise } from "../measure.ts";
import { runCommand } from "../processes.ts";
import type { Row } from "../table.ts";
import type { BenchService } from "../toolstack/service.ts";
import { rssBytes } from "./process-tree.ts";

const TARGET_RATIO = 0.9;
const RSS_TARGET_MIB = 300;

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

export async function benchExportDownload(service: BenchService, site: ConsoleService, sizeBytes: number, runs: number): Promise<Row[]> {
  const archive = testXva({ name: "bench export", disks: [{ size: sizeBytes, blocks: new PatternBlocks() }] });
  const imported = await http(`${service.url}import?session_id=${service.client.session}`, { method: "PUT", body: archive });
  const taskRef = String(imported.headers["task-id"] ?? "");
  const task = await service.client.waitTask(taskRef);
  if (task.status !== "success") throw new Error(`the import failed: ${JSON.stringify(task.error_info)}`);
  const [vmRef] = z.array(z.string()).parse(parseXmlRpcValue(task.result));
  const uuid = await service.client.call(z.string(), "VM.get_uuid", vmRef);

  const direct = () => curlSeconds(`${service.url}export?session_id=${service.client.session}&uuid=${uuid}&use_compression=false`, []);
  const through = () => curlSeconds(`${site.url}/api/download/vm/${uuid}.xva?compression=none`, [`cookie: ${site.cookie}`]);
  await through(); // warm: the route's first load
  const ours: number[] = [];
  const baseline: number[] = [];
  let bytes = 0;
  let peakRss = 0;
  const idleRss = rssBytes(site.pid);
  for (let i = 0; i < runs; i++) {
    const base = await direct();
    baseline.push(megabytesPerSecond(base.bytes, base.seconds));
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssBytes(site.pid))), 100);
    const mine = await through().finally(() => clearInterval(sampler));
    if (mine.bytes !== base.bytes) throw new Error(`the console sent ${mine.bytes} bytes, the toolstack ${base.bytes}`);
    bytes = mine.bytes;
    ours.push(megabytesPerSecond(mine.bytes, mine.seconds));
  }
  const ratio = summarise(ours).median / summarise(baseline).median;
  return [
    {
      measure: `export download through the console, ${formatSize(bytes)} XVA (disk ${formatSize(sizeBytes)}, uncompressed)`,
      ours: `${summarise(ours).median.toFixed(0)} MB/s`,
      baseline: `${summarise(baseline).median.toFixed(0)} MB/s curl of /export`,
      ratio,
      target: `≥ ${TARGET_RATIO}×`,
      met: ratio >= TARGET_RATIO,
      note: `${runs} runs each, interleaved; every byte also written to the console's spool`,
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
