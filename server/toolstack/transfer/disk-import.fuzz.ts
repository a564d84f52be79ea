// Fuzz target (issue 23): PUT /import_raw_vdi end to end with headers of real qemu-img images mutated (VHD dynamic
// and fixed, a qcow2 sent as a VHD, VMDK streamOptimized, VHDX), and xapi chunked streams with lying frames, into
// a new VDI or a given one. Each case: the task ends (success, or a failure with a XenAPI error other than
// INTERNAL_ERROR) within the bound; afterwards no VDI the import made is left (a made one is destroyed after a
// success), no volume file beyond them, nothing kept aside, no plugin daemon or qemu-nbd, and the service answers
// a probe call.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { fuzz, type FuzzBudget, within } from "../../fuzz-testing.ts";
import { daemonPids, startTestToolstack, type TestToolstack } from "../storage-testing.ts";
import { http, MiB } from "./testing.ts";

const BUDGET: FuzzBudget = { slice: 8, full: 400, fullSeconds: 80, caseMs: 40_000 };
const TASK_MS = 20_000;
const SETTLE_MS = 10_000;
const PROBE_MS = 2000;
/** Mutations land in the metadata: the first 4 KiB (footer copy, header, BAT; qcow2's header) and the last sector. */
const HEAD = 4096;

let host: TestToolstack;
let dir: string;
let images: Array<{ format: "vhd" | "raw" | "vmdk" | "vhdx"; bytes: Buffer }>;
let target: string;

before(async () => {
  host = await startTestToolstack();
  dir = mkdtempSync(join(tmpdir(), "hangar-disk-import-fuzz-"));
  const raw = Buffer.alloc(6 * MiB);
  for (let i = 0; i < MiB; i++) raw[i] = (i * 5) & 0xff;
  raw.fill(9, 4 * MiB, 4 * MiB + 8192);
  writeFileSync(join(dir, "disk.raw"), raw);
  const convert = (format: string, options: string[], name: string) => {
    execFileSync("qemu-img", ["convert", "-f", "raw", "-O", format, ...options, join(dir, "disk.raw"), join(dir, name)]);
    return readFileSync(join(dir, name));
  };
  images = [
    { format: "vhd", bytes: convert("vpc", ["-o", "subformat=dynamic,force_size=on"], "dynamic.vhd") },
    { format: "vhd", bytes: convert("vpc", ["-o", "subformat=fixed,force_size=on"], "fixed.vhd") },
    { format: "vhd", bytes: convert("qcow2", [], "disk.qcow2") },
    { format: "vmdk", bytes: convert("vmdk", ["-o", "subformat=streamOptimized"], "disk.vmdk") },
    { format: "vhdx", bytes: convert("vhdx", [], "disk.vhdx") },
    { format: "raw", bytes: raw },
  ];
  target = await host.client.call<string>("VDI.create", { SR: await defaultSr(), virtual_size: 8 * MiB, name_label: "fuzz target", type: "user", sharable: false, read_only: false, other_config: {} });
});
after(async () => {
  await host.stop();
  rmSync(dir, { recursive: true, force: true });
});

const call = <T,>(method: string, ...params: unknown[]) => host.client.call<T>(method, ...params);
const defaultSr = async () => call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);

/** The qemu-nbd processes a VHDX import started (serving a file kept aside under the data directory). */
function qemuNbds(): number {
  try {
    return Number(execFileSync("pgrep", ["-c", "-f", `qemu-nbd.*${host.dataDir}`], { encoding: "utf8" }).trim());
  } catch {
    return 0; // pgrep exits 1 when none runs
  }
}

async function leftovers(): Promise<{ vdis: number; volumes: string[]; daemons: number; keptAside: string[] }> {
  const volumes = readdirSync(join(host.dataDir, "srs"), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && !/^(hangar-sr\.|stats$)/.test(entry.name))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  return { vdis: (await call<string[]>("VDI.get_all")).length, volumes, daemons: daemonPids(host.dataDir).length + qemuNbds(), keptAside: readdirSync(join(host.dataDir, "spill")) };
}

/** xapi chunked frames with offsets and lengths that may lie: past the disk, longer than the data sent. */
const chunkedStream = fc.array(fc.record({ offset: fc.nat({ max: 10 * MiB }), length: fc.nat({ max: 70_000 }), sent: fc.option(fc.nat({ max: 70_000 }), { nil: undefined }) }), { maxLength: 5 }).map((frames) => {
  const parts: Buffer[] = [];
  for (const frame of frames) {
    const header = Buffer.alloc(12);
    header.writeBigUInt64LE(BigInt(frame.offset), 0);
    header.writeUInt32LE(frame.length, 8);
    parts.push(header, Buffer.alloc(frame.sent ?? frame.length, 0x5c));
  }
  parts.push(Buffer.alloc(12));
  return Buffer.concat(parts);
});

const imageCase = fc.record({
  kind: fc.constant("image" as const),
  image: fc.nat(),
  writes: fc.array(fc.record({ tail: fc.boolean(), at: fc.nat({ max: HEAD - 1 }), bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }) }), { maxLength: 5 }),
  cut: fc.option(fc.nat(), { nil: undefined }),
  intoVdi: fc.boolean(),
  withLength: fc.boolean(),
});
const chunkedCase = fc.record({ kind: fc.constant("chunked" as const), stream: chunkedStream });

test("PUT /import_raw_vdi: mutated qemu-img images and lying chunked frames import or fail in words, and leave nothing behind", async (t) => {
  const outcomes = new Map<string, number>();
  await fuzz(t, "disk import end to end", BUDGET, fc.oneof(imageCase, chunkedCase), async (input) => {
    const before = await leftovers();
    let query: string;
    let body: Buffer;
    let withLength = true;
    if (input.kind === "chunked") {
      query = `vdi=${target}&chunked=true`;
      body = input.stream;
    } else {
      const image = images[input.image % images.length]!;
      body = Buffer.from(image.bytes);
      for (const write of input.writes) Buffer.from(write.bytes).copy(body, write.tail ? body.length - 512 + (write.at % 512) : write.at);
      if (input.cut !== undefined) body = body.subarray(0, input.cut % body.length);
      query = `format=${image.format}&${input.intoVdi ? `vdi=${target}` : `sr_id=${await defaultSr()}`}`;
      withLength = input.withLength || (!input.intoVdi && image.format === "raw");
    }
    const answer = await within(
      TASK_MS,
      http(`${host.client.url}/import_raw_vdi?session_id=${host.client.session}&${query}`, { method: "PUT", body: withLength ? body : Readable.from([body]), headers: withLength ? { "content-length": String(body.length) } : {} }),
      "the answer to PUT /import_raw_vdi",
    );
    const taskRef = answer.headers["task-id"];
    let made: string | undefined;
    if (taskRef === undefined) {
      assert.ok(answer.status === 200 ? body.length === 0 : answer.status === 400, `answered ${answer.status} without a task: ${answer.body.toString()}`);
    } else {
      const task = await host.client.waitTask(String(taskRef), TASK_MS);
      const outcome = task.status === "success" ? "success" : String((task.error_info as string[])[0]);
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      assert.ok(task.status === "success" || (task.status === "failure" && outcome !== "INTERNAL_ERROR"), `task ${String(task.status)}: ${JSON.stringify(task.error_info)}`);
      if (task.status === "success" && !query.includes(`vdi=${target}`)) made = /OpaqueRef:[0-9a-f-]+/.exec(String(task.result))?.[0];
    }
    if (made !== undefined) await call("VDI.destroy", made);
    for (const deadline = Date.now() + SETTLE_MS; ; await sleep(100)) {
      const now = await leftovers();
      if (now.daemons <= before.daemons && now.vdis === before.vdis && JSON.stringify(now.volumes) === JSON.stringify(before.volumes) && now.keptAside.length === 0) break;
      assert.ok(Date.now() < deadline, `left behind after ${SETTLE_MS} ms: ${JSON.stringify({ before, now })}`);
    }
    await within(PROBE_MS, call("session.get_this_host", host.client.session), "the probe call");
  });
  t.diagnostic(`disk import outcomes: ${[...outcomes].map(([outcome, count]) => `${outcome} ${count}`).join(", ")}`);
});
