// Row group 4: the management API on each database engine. The same calls, with one caller and with many at
// once (JSON-RPC), against the suite's service (SQLite, embedded) and against a second `hangar serve` whose
// state is in PostgreSQL (a throwaway cluster of Debian's server on this machine, durability on as in
// production), both seeded alike. Baseline: the SQLite service.
import { join } from "node:path";
import { startTestPostgres } from "../../server/toolstack/db/testing.ts";
import type { Row } from "../table.ts";
import { type BenchService, formatLatency, type LatencyBatch, measureBatch, percentile, pool, prepareCall, seedVmsAndTasks, startBenchService } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

const CALLS = ["task.get_record", "VM.get_all_records"] as const;

async function seed(service: BenchService, sizes: ToolstackSizes): Promise<Record<(typeof CALLS)[number], string[]>> {
  const tasks = await seedVmsAndTasks(service, sizes, "engine");
  return { "task.get_record": [service.client.session, tasks[tasks.length >> 1]!], "VM.get_all_records": [service.client.session] };
}

export async function benchEngines(sqlite: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const cluster = await startTestPostgres({ durable: true });
  try {
    const postgres = await startBenchService(join(sqlite.dataDir, "..", "data-postgres"), { HANGAR_DATABASE_URL: await cluster.createDatabase() });
    try {
      const services = { SQLite: sqlite, PostgreSQL: postgres };
      const params = { SQLite: await seed(sqlite, sizes), PostgreSQL: await seed(postgres, sizes) };
      const crowds = [1, sizes.callers];
      const contenders = CALLS.flatMap((call) =>
        crowds.flatMap((callers) => (["SQLite", "PostgreSQL"] as const).map((engine) => ({ call, callers, engine, run: prepareCall(services[engine].url, "JSON-RPC", call, params[engine][call]) }))),
      );
      const key = (c: { call: string; callers: number; engine: string }) => `${c.call} ${c.callers} ${c.engine}`;
      const batches = new Map<string, LatencyBatch[]>(contenders.map((c) => [key(c), []]));
      for (const c of contenders) await measureBatch(services[c.engine], c.run, Math.min(c.callers, 20), 5);
      for (let round = 0; round < sizes.rounds; round++) {
        for (const c of contenders) batches.get(key(c))!.push(await measureBatch(services[c.engine], c.run, c.callers, c.callers === 1 ? sizes.callsAlone : sizes.callsEach));
      }
      const rows: Row[] = [];
      for (const call of CALLS) {
        for (const callers of crowds) {
          const ours = pool(batches.get(key({ call, callers, engine: "PostgreSQL" }))!);
          const base = pool(batches.get(key({ call, callers, engine: "SQLite" }))!);
          rows.push({
            measure: `${call} on PostgreSQL, JSON-RPC, ${callers === 1 ? "1 caller" : `${callers} callers at once`}`,
            ours: formatLatency(ours.ms),
            baseline: `${formatLatency(base.ms)} on SQLite`,
            ratio: percentile(ours.ms, 50) / percentile(base.ms, 50),
            target: "",
            met: null,
            note: `${ours.calls} calls, ${ours.callsPerSecond.toFixed(0)}/s (SQLite ${base.callsPerSecond.toFixed(0)}/s); service CPU ${ours.cpuMsPerCall.toFixed(2)} ms/call (SQLite ${base.cpuMsPerCall.toFixed(2)}); PostgreSQL's own CPU not counted`,
          });
        }
      }
      return rows;
    } finally {
      await postgres.stop();
    }
  } finally {
    await cluster.stop();
  }
}
