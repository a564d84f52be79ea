// How one toolstack task reads on the page: kind, state, time left, failure words, whether it can be
// cancelled. Records as the toolstack makes them; no toolstack call is needed for tasks without data state.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { XenApiClient } from "../../xenapi/client.ts";
import { parseXenDate } from "../../xenapi/values.ts";
import { classify, describeTask, withoutStackTrace, ZTaskListRecord } from "./list-tasks.ts";

const noToolstack = {} as XenApiClient;
const created = Date.UTC(2026, 10, 25, 13, 0, 0);
const xenDate = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z").replaceAll("-", "");

function record(fields: Record<string, unknown>) {
  return ZTaskListRecord.parse({
    uuid: "5b0c4a1e-0000-4000-8000-000000000001",
    name_label: "Async.VDI.snapshot",
    name_description: "",
    status: "pending",
    progress: 0,
    created: xenDate(created),
    finished: "19700101T00:00:00Z",
    result: "",
    error_info: [],
    allowed_operations: ["cancel"],
    other_config: {},
    ...fields,
  });
}

const describe = (fields: Record<string, unknown>, secondsLater: number) =>
  describeTask(noToolstack, "/nonexistent", "OpaqueRef:t", record(fields), created + secondsLater * 1000);

test("XenAPI dates, with or without dashes; the epoch means not finished", () => {
  assert.equal(parseXenDate("20261125T13:00:00Z"), created);
  assert.equal(parseXenDate("2026-11-25T13:00:00Z"), created);
  assert.equal(parseXenDate("19700101T00:00:00Z"), undefined);
  assert.equal(parseXenDate("garbage"), undefined);
});

test("kinds from the call a task's name_label names", () => {
  assert.equal(classify("Async.VDI.copy", undefined), "vdi-copy");
  assert.equal(classify("VDI.hangar_data_copy", undefined), "data-copy");
  assert.equal(classify("Async.VDI.hangar_data_mirror_to_vdi", undefined), "data-mirror");
  assert.equal(classify("VM import", undefined), "import");
  assert.equal(classify("Export of VM: web", undefined), "export");
  assert.equal(classify("Async.SR.create", undefined), "sr");
  assert.equal(classify("Async.PBD.plug", undefined), "sr");
  assert.equal(classify("Async.VDI.resize", undefined), "volume");
  assert.equal(classify("Async.VM.hangar_destroy", undefined), "vm");
  assert.equal(classify("my own task", undefined), "other");
});

test("time left as elapsed / progress − elapsed, hidden at 0 % and for the first 10 s", async () => {
  assert.equal((await describe({ progress: 0 }, 60)).etaS, null, "no progress yet");
  assert.equal((await describe({ progress: 0.5 }, 5)).etaS, null, "too young to guess");
  const half = await describe({ progress: 0.25 }, 60);
  assert.equal(half.etaS, 180);
  assert.equal(half.state, "running");
  assert.equal(half.durationS, 60);
  assert.equal(half.finished, null);
  assert.equal(half.canCancel, true);
  assert.equal(half.canDestroy, false);
  assert.equal(half.title, "VDI.snapshot");
  assert.equal(half.rateBytesPerS, null, "no byte count for a snapshot");
  assert.equal((await describe({ progress: 0.25, allowed_operations: [] }, 60)).canCancel, false, "cancel only where allowed");
  assert.equal((await describe({ progress: 0.25, status: "cancelling", allowed_operations: [] }, 60)).state, "cancelling");
});

test("a finished task: its duration, no time left, failures in words without stack traces", async () => {
  const done = await describe({ status: "success", progress: 1, finished: xenDate(created + 90_000), allowed_operations: [] }, 600);
  assert.equal(done.state, "succeeded");
  assert.equal(done.durationS, 90);
  assert.equal(done.etaS, null);
  assert.equal(done.canDestroy, true);
  assert.equal(done.error, null);

  const failed = await describe(
    { status: "failure", finished: xenDate(created + 1000), error_info: ["SR_BACKEND_FAILURE", "Backend_failed", "disk 7 unreadable\n    at Object.stat (/opt/plugin/index.js:10:3)\n    at run"] },
    10,
  );
  assert.equal(failed.state, "failed");
  assert.equal(failed.errorCode, "SR_BACKEND_FAILURE");
  assert.equal(failed.error, "The storage plugin failed: disk 7 unreadable");
  const bare = await describe({ status: "failure", finished: xenDate(created + 1000), error_info: [] }, 10);
  assert.equal(bare.error, "The task failed without saying why.");
  assert.equal(withoutStackTrace("copy failed\nTraceback (most recent call last):\n  File x"), "copy failed");
});

test("a finished data task reads from its record alone: its volumes' names and size from its state, no VDI.get_record", async () => {
  const asked: string[] = [];
  const toolstack = {
    call: (_schema: unknown, method: string, ...params: unknown[]) => {
      asked.push(`${method} ${params.join(" ")}`);
      return Promise.resolve({ name_label: "asked", virtual_size: 7 });
    },
  } as unknown as XenApiClient;
  const dataTask = (state: Record<string, unknown>, fields: Record<string, unknown>) =>
    record({ name_label: "Async.VDI.hangar_data_copy", other_config: { "hangar:data-operation": JSON.stringify({ what: "data-copy", vdi: "OpaqueRef:v", attachments: [], ...state }) }, ...fields });
  const ended = { status: "success", progress: 1, finished: xenDate(created + 10_000), allowed_operations: [] };
  const describeData = (state: Record<string, unknown>, fields: Record<string, unknown>) =>
    describeTask(toolstack, "/nonexistent", "OpaqueRef:t", dataTask(state, fields), created + 60_000);

  const named = await describeData({ name: "db", size: 64 * 1024 * 1024 }, ended);
  assert.equal(named.title, "Copy of volume “db” to an NBD export");
  assert.equal(named.totalBytes, 64 * 1024 * 1024);
  assert.equal(named.rateBytesPerS, (64 * 1024 * 1024) / 10);
  const unnamed = await describeData({}, ended);
  assert.equal(unnamed.title, "Copy of a volume to an NBD export", "a task of an older toolstack: its volume is not asked for");
  assert.equal(unnamed.totalBytes, null);
  const into = await describeData({ what: "data-mirror", name: "web", into: "OpaqueRef:w", into_name: "web copy" }, { ...ended, status: "cancelled", name_label: "Async.VDI.hangar_data_mirror_to_vdi" });
  assert.equal(into.title, "Mirror of volume “web” into volume “web copy”");
  assert.deepEqual(asked, []);

  // Running, with a state that names no volume yet: its volume is asked for (cached a while).
  const running = await describeData({ vdi: "OpaqueRef:running-source" }, {});
  assert.equal(running.title, "Copy of volume “asked” to an NBD export");
  assert.deepEqual(asked, ["VDI.get_record OpaqueRef:running-source"]);
});
