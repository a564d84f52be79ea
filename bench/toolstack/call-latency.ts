// Row group 1: latency of everyday calls with one caller and with many at once, over JSON-RPC and over
// XML-RPC: VM.get_all_records (VMs seeded), task.get_record (one of the tasks seeded), SR.get_all_records (the
// default SR), and VM.set_name_description, a change, so audited (a row of the trail written before it answers).
// Baseline: session.get_uuid over the same wire with as many callers, the floor of any call (HTTP, parsing,
// the session check and the role check, encoding). Contenders run in turn, round after round. The trail's
// growth (rows and bytes per 1,000 audited calls) is read from the service's database afterwards.
import { DatabaseSync } from "node:sqlite";
import { join } from "node:path";
import { z } from "zod";
import type { Row } from "../table.ts";
import { type BenchService, formatLatency, type LatencyBatch, measureBatch, percentile, pool, prepareCall, seedVmsAndTasks, type Wire, WIRES } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

const CALLS = ["session.get_uuid", "task.get_record", "VM.get_all_records", "SR.get_all_records", "VM.set_name_description"] as const;
type Call = (typeof CALLS)[number];

export async function benchCallLatency(service: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const tasks = await seedVmsAndTasks(service, sizes, "bench");
  const session = service.client.session;
  const [vm] = await service.client.call(z.array(z.string()), "VM.get_all");
  const auditBefore = auditSize(service.dataDir);
  const params: Record<Call, string[]> = {
    "session.get_uuid": [session, session],
    "task.get_record": [session, tasks[tasks.length >> 1]!],
    "VM.get_all_records": [session],
    "SR.get_all_records": [session],
    "VM.set_name_description": [session, vm!, "described by the bench"],
  };
  const what: Record<Call, string> = {
    "session.get_uuid": "",
    "task.get_record": `one of ${sizes.tasks} tasks`,
    "VM.get_all_records": `${sizes.vms} VMs`,
    "SR.get_all_records": "1 SR",
    "VM.set_name_description": "a change: audited",
  };

  const crowds = [1, sizes.callers];
  const contenders = CALLS.flatMap((call) => WIRES.flatMap((wire) => crowds.map((callers) => ({ call, wire, callers, run: prepareCall(service.url, wire, call, params[call]) }))));
  const key = (call: Call, wire: Wire, callers: number) => `${call} ${wire} ${callers}`;
  const batches = new Map<string, LatencyBatch[]>(contenders.map((c) => [key(c.call, c.wire, c.callers), []]));
  // Warm-up: connections, JIT, caches on both sides.
  for (const contender of contenders) await measureBatch(service, contender.run, Math.min(contender.callers, 20), 5);
  for (let round = 0; round < sizes.rounds; round++) {
    for (const contender of contenders) {
      const calls = contender.callers === 1 ? sizes.callsAlone : sizes.callsEach;
      batches.get(key(contender.call, contender.wire, contender.callers))!.push(await measureBatch(service, contender.run, contender.callers, calls));
    }
  }

  const rows: Row[] = [];
  for (const call of CALLS.filter((c) => c !== "session.get_uuid")) {
    for (const wire of WIRES) {
      for (const callers of crowds) {
        const ours = pool(batches.get(key(call, wire, callers))!);
        const floor = pool(batches.get(key("session.get_uuid", wire, callers))!);
        const ratio = percentile(ours.ms, 50) / percentile(floor.ms, 50);
        rows.push({
          measure: `${call} (${what[call]}), ${wire}, ${callers === 1 ? "1 caller" : `${callers} callers at once`}`,
          ours: formatLatency(ours.ms),
          baseline: `${formatLatency(floor.ms)} session.get_uuid`,
          ratio,
          target: "",
          met: null,
          note: `${ours.calls} calls, ${ours.callsPerSecond.toFixed(0)}/s (floor ${floor.callsPerSecond.toFixed(0)}/s); service CPU ${ours.cpuMsPerCall.toFixed(2)} ms/call (floor ${floor.cpuMsPerCall.toFixed(2)})`,
        });
      }
    }
  }
  const audit = auditSize(service.dataDir);
  const audited = audit.rows - auditBefore.rows;
  rows.push({
    measure: "audit trail growth per 1,000 audited calls",
    ours: `${((1000 * (audit.bytes - auditBefore.bytes)) / Math.max(1, audited) / 1024).toFixed(0)} KiB`,
    baseline: "",
    ratio: null,
    target: "",
    met: null,
    note: `${audited} rows written by the section (${audit.rows} in all), their fields and index entry; SQLite's own page overhead not counted`,
  });
  return rows;
}

/** The audit table's rows and the bytes of their fields (as stored), read from the service's SQLite file. */
function auditSize(dataDir: string): { rows: number; bytes: number } {
  const db = new DatabaseSync(join(dataDir, "toolstack.db"), { readOnly: true });
  try {
    const row = db
      .prepare(
        "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(time) + LENGTH(host) + LENGTH(trackid) + LENGTH(subject_sid) + LENGTH(subject_name) + LENGTH(client) + LENGTH(decision) + LENGTH(outcome) + LENGTH(kind) + LENGTH(action) + LENGTH(args) + LENGTH(prev_hash) + LENGTH(hash) + 8 + LENGTH(time) + 8), 0) AS bytes FROM audit_log",
      )
      .get() as { n: number; bytes: number };
    return { rows: Number(row.n), bytes: Number(row.bytes) };
  } finally {
    db.close();
  }
}
