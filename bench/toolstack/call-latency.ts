// Row group 1: latency of everyday calls with one caller and with many at once, over JSON-RPC and over
// XML-RPC: VM.get_all_records (VMs seeded), task.get_record (one of the tasks seeded), SR.get_all_records (the
// default SR). Baseline: session.get_uuid over the same wire with as many callers, the floor of any call
// (HTTP, parsing, the session check, encoding). Contenders run in turn, round after round.
import type { Row } from "../table.ts";
import { type BenchService, formatLatency, type LatencyBatch, measureBatch, percentile, pool, prepareCall, seedVmsAndTasks, type Wire, WIRES } from "./service.ts";
import type { ToolstackSizes } from "./sizes.ts";

const CALLS = ["session.get_uuid", "task.get_record", "VM.get_all_records", "SR.get_all_records"] as const;
type Call = (typeof CALLS)[number];

export async function benchCallLatency(service: BenchService, sizes: ToolstackSizes): Promise<Row[]> {
  const tasks = await seedVmsAndTasks(service, sizes, "bench");
  const session = service.client.session;
  const params: Record<Call, string[]> = {
    "session.get_uuid": [session, session],
    "task.get_record": [session, tasks[tasks.length >> 1]!],
    "VM.get_all_records": [session],
    "SR.get_all_records": [session],
  };
  const what: Record<Call, string> = {
    "session.get_uuid": "",
    "task.get_record": `one of ${sizes.tasks} tasks`,
    "VM.get_all_records": `${sizes.vms} VMs`,
    "SR.get_all_records": "1 SR",
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
  return rows;
}
