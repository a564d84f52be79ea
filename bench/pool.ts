// The pool suite (`npm run bench -- pool`): the XVA transfers of a pool, sent to the master while the data
// lives on a member, against the same transfers sent to the member directly, interleaved in the same run.
// Two `hangar serve` processes on 127.0.0.2 (master) and 127.0.0.3 (member) share a throwaway PostgreSQL;
// the member's SR holds the VM and takes the imports, so the master answers each request with a 302 that curl
// follows (-L). The member's CPU is metered (it does the work); the master's is shown beside it. Wall time
// and CPU per GiB of disk data; progress to stderr, the table to stdout.
import { mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { freePort } from "../server/free-port.ts";
import { startTestPostgres } from "../server/toolstack/db/testing.ts";
import { ROOT_PASSWORD, type ServeProcess, startServeProcess } from "../server/toolstack/testing.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { formatSize, GiB, interleave, megabytesPerSecond, spread } from "./measure.ts";
import { cpuSeconds } from "./processes.ts";
import { renderTable, unavailableRow, type Row } from "./table.ts";
import { openWorkspace } from "./workspace.ts";
import { makeVm } from "./xva.ts";
import type { XvaService } from "./xva/service.ts";
import { dataBytes, xvaSizes } from "./xva/sizes.ts";
import { destroyVm, exportVm, importFile, type Transfer } from "./xva/transfer.ts";

const log = (message: string) => void process.stderr.write(`[bench pool] ${message}\n`);
const TARGET = 0.95;
/** A ratio this close to 1 needs more than one round to be told from noise. */
const MIN_ROUNDS = 3;

const speed = (data: number, seconds: number) => `${seconds.toFixed(1)} s, ${megabytesPerSecond(data, seconds).toFixed(0)} MB/s`;

export async function run(): Promise<void> {
  const sizes = xvaSizes();
  const rounds = Math.max(MIN_ROUNDS, sizes.rounds);
  const disk = sizes.big;
  const data = dataBytes(disk);
  const name = `${formatSize(disk.size)} disk, ${formatSize(data)} data`;
  const workspace = openWorkspace("hangar-bench-pool");
  const started = Date.now();
  const rows: Row[] = [];
  try {
    await workspace.withScratch("pool", async (scratch) => {
      const cluster = await startTestPostgres();
      scratch.defer(() => cluster.stop());
      const env = { HANGAR_DATABASE_URL: await cluster.createDatabase(), HANGAR_RUN_DIR: process.env.HANGAR_RUN_DIR };
      const port = await freePort();
      const host = async (address: string, role: string): Promise<ServeProcess> => {
        const dir = join(scratch.fast, address);
        mkdirSync(dir);
        const serve = await startServeProcess(dir, { ...env, HANGAR_HOST_ADDRESS: address, HANGAR_POOL_ROLE: role }, { address, port });
        scratch.defer(() => serve.stop());
        return serve;
      };
      const master = await host("127.0.0.2", "master");
      const member = await host("127.0.0.3", "member");
      const client = await XenApiClient.login(master.url, "root", ROOT_PASSWORD, "hangar-bench-pool");
      const hosts = await client.call(z.record(z.string(), z.looseObject({ address: z.string(), PBDs: z.array(z.string()) })), "host.get_all_records");
      const memberPbd = Object.values(hosts).find((h) => h.address === "127.0.0.3")!.PBDs[0]!;
      const sr = await client.call(z.string(), "PBD.get_SR", memberPbd);
      // Both views meter the member, which does the work; they differ only in the URL curl is given.
      const stop = async () => {};
      const direct: XvaService = { url: member.url, pid: member.pid, client: new XenApiClient(member.url, client.session), importSr: sr, stop };
      const viaMaster: XvaService = { url: master.url, pid: member.pid, client, importSr: sr, stop };

      log(`set-up: VM with a ${name} on the member's SR`);
      const { vm, raw } = await makeVm(direct, scratch.fast, disk, "pool");
      rmSync(raw, { force: true });
      const archive = join(scratch.fast, "pool.xva");
      await exportVm(direct, vm, "none", archive);
      log(`saved the export: ${formatSize(statSync(archive).size)}`);

      const contenders = { "via master": viaMaster, direct } as const;
      const measure = async (label: string, once: (service: XvaService) => Promise<Transfer>) => {
        const memberCpu: Record<string, number[]> = { "via master": [], direct: [] };
        const masterCpu: number[] = [];
        try {
          const samples = await interleave(rounds, ["via master", "direct"] as const, async (who, round) => {
            const masterBefore = cpuSeconds(master.pid);
            const transfer = await once(contenders[who]);
            if (who === "via master") masterCpu.push(cpuSeconds(master.pid) - masterBefore);
            memberCpu[who]!.push(transfer.cost.service + transfer.cost.plugins + transfer.cost.daemons);
            for (const made of transfer.vms) await destroyVm(direct, made);
            log(`${label} round ${round + 1}/${rounds}: ${who} ${speed(data, transfer.seconds)}`);
            return transfer.seconds;
          });
          const ratio = samples.direct.median / samples["via master"].median;
          const perGiB = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]! / (data / GiB);
          rows.push({
            measure: `${label}, ${name}`,
            ours: speed(data, samples["via master"].median),
            baseline: `${speed(data, samples.direct.median)} direct to the member`,
            ratio,
            target: `≥ ${TARGET}×`,
            met: ratio >= TARGET,
            note: `CPU/GiB on the member ${perGiB(memberCpu["via master"]!).toFixed(2)} s via the master vs ${perGiB(memberCpu.direct!).toFixed(2)} s direct; the master's own ${perGiB(masterCpu).toFixed(3)} s (the redirect); spread ${spread(samples["via master"], 1)} vs ${spread(samples.direct, 1)} s`,
          });
        } catch (error) {
          log(`${label} failed: ${(error as Error).stack}`);
          rows.push({ ...unavailableRow(`${label}, ${name}`, `≥ ${TARGET}×`, (error as Error).message.slice(0, 300)), ours: "FAILED" });
        }
      };
      await measure("export, uncompressed, through the master", (service) => exportVm(service, vm, "none"));
      await measure("import, uncompressed, through the master", (service) => importFile(service, archive));
      await destroyVm(direct, vm);
    });
  } finally {
    await workspace.close();
  }
  const title = `Hangar pool bench — scale ${sizes.scale}, ${rounds} round(s), ${((Date.now() - started) / 1000).toFixed(0)} s in all; MB/s of disk data, CPU/GiB of disk data`;
  process.stdout.write(`${renderTable(title, rows)}\n`);
  if (rows.some((row) => row.ours === "FAILED")) process.exitCode = 1;
}
