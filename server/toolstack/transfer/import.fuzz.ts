// Fuzz target (issue 22): PUT /import end to end with mutated small archives (archive-fuzz-testing.ts: ours, Xen
// Orchestra's, a legacy package; plain, gzip or zstd; sent with a length or chunked). Each case: the task ends
// (success, or a failure with a XenAPI error other than INTERNAL_ERROR) within the bound, and afterwards (a VM
// made is destroyed with its disks) the VMs, VBDs, VIFs and VDIs are as before, no volume file is left in the
// SR's directory, no plugin daemon is left running, and the service answers a probe call.
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget, within } from "../../fuzz-testing.ts";
import { archiveMutation, hangarSeed, legacySeed, mutatedArchive, ovaMutation, type SeedArchive, xenOrchestraSeed } from "../../xva/archive-fuzz-testing.ts";
import { parseXmlRpcValue } from "../../xenapi/xml-rpc.ts";
import { daemonPids, startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { http } from "./testing.ts";

const BUDGET: FuzzBudget = { slice: 8, full: 600, fullSeconds: 80, caseMs: 40_000 };
/** The import's task ends within this once its body is sent. */
const TASK_MS = 20_000;
/** What an import made is gone within this once it ended (volumes, daemons). */
const SETTLE_MS = 10_000;
const PROBE_MS = 2000;

let host: TestToolstack;
let seeds: SeedArchive[];
before(async () => {
  host = await startTestToolstack();
  seeds = [await hangarSeed("xxhash"), await xenOrchestraSeed(), await legacySeed()];
});
after(async () => host.stop());

const call = <T,>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);

/** What an import may leave behind: objects by class, the SR directory's volume files, the plugin daemons. */
async function leftovers(): Promise<{ objects: Record<string, number>; volumes: string[]; daemons: number }> {
  const objects: Record<string, number> = {};
  for (const cls of ["VM", "VBD", "VIF", "VDI"]) objects[cls] = (await call<string[]>(`${cls}.get_all`)).length;
  // The SRs' own bookkeeping (their databases, space figures) changes with every call; volume files come and go.
  const volumes = readdirSync(join(host.dataDir, "srs"), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && !/^(hangar-sr\.|stats$)/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  return { objects, volumes, daemons: daemonPids(host.dataDir).length };
}

test("PUT /import: mutated archives import or fail in words, and leave nothing behind", async (t) => {
  // Half the cases edit ova.xml alone: most of those get past the reader to the records, the disks and their undo.
  const cases = fc.record({ seed: fc.nat({ max: seeds.length - 1 }), mutation: fc.oneof(archiveMutation, ovaMutation), force: fc.boolean(), chunked: fc.boolean() });
  const outcomes = new Map<string, number>();
  await fuzz(t, "import end to end", BUDGET, cases, async ({ seed, mutation, force, chunked }) => {
    const before = await leftovers();
    const archive = mutatedArchive(seeds[seed]!, mutation);
    const body = chunked ? Readable.from([archive]) : archive;
    const answer = await within(TASK_MS, http(`${host.client.url}/import?session_id=${host.client.session}${force ? "&force=true" : ""}`, { method: "PUT", body }), "the answer to PUT /import");
    assert.equal(answer.status, 200, answer.body.toString());
    const taskRef = answer.headers["task-id"];
    if (taskRef === undefined) {
      // Only an empty body (Xen Orchestra's probe) is answered without a task.
      assert.equal(archive.length, 0, "a body answered without a task");
    } else {
      const task = await host.client.waitTask(String(taskRef), TASK_MS);
      const outcome = task.status === "success" ? "success" : String((task.error_info as string[])[0]);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      assert.ok(task.status === "success" || (task.status === "failure" && outcome !== "INTERNAL_ERROR"), `task ${String(task.status)}: ${JSON.stringify(task.error_info)}`);
      if (task.status === "success") for (const vm of parseXmlRpcValue(String(task.result)) as string[]) await call("VM.hangar_destroy", vm, false);
    }
    for (const deadline = Date.now() + SETTLE_MS; ; await sleep(100)) {
      const now = await leftovers();
      if (now.daemons <= before.daemons && JSON.stringify({ ...now, daemons: 0 }) === JSON.stringify({ ...before, daemons: 0 })) break;
      assert.ok(Date.now() < deadline, `left behind after ${SETTLE_MS} ms: ${JSON.stringify({ before, now })}`);
    }
    await within(PROBE_MS, call("session.get_this_host", host.client.session), "the probe call");
  });
  t.diagnostic(`import outcomes: ${[...outcomes].map(([outcome, count]) => `${outcome} ${count}`).join(", ")}`);
});
