// The tasks router against a real toolstack: copies and mirrors started through it are tasks the list
// describes (kind, progress, rate, state), a failure reads in words, the history is paged and filtered by the
// toolstack, a mirror is cancelled, a finished task leaves the history, and a caller without a session gets nothing.
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { test, type TestContext } from "node:test";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { startProcess, waitForSocket } from "../../nbd/testing.ts";
import { type ConsoleUnderTest, startConsoleUnderTest } from "../testing.ts";
import type { TListTasksResponse, TTask } from "./schema.ts";

const MiB = 1024 * 1024;
let serial = 0;

async function nbdkit(t: TestContext, console: ConsoleUnderTest, args: string[]): Promise<string> {
  const socket = join(console.toolstack.dataDir, `nbdkit-${serial++}.sock`);
  startProcess((fn) => t.after(fn), "nbdkit", ["--unix", socket, "--foreground", ...args]);
  await waitForSocket(socket);
  return `nbd+unix:///?socket=${socket}`;
}

async function defaultSr(console: ConsoleUnderTest): Promise<string> {
  const [pool] = await console.xapi.call(z.array(z.string()), "pool.get_all");
  return console.xapi.call(z.string(), "pool.get_default_SR", pool);
}

async function newVdi(console: ConsoleUnderTest, size: number, name = `tasks test ${serial++}`): Promise<string> {
  return console.xapi.call(z.string(), "VDI.create", { SR: await defaultSr(console), virtual_size: size, name_label: name });
}

const everyTask = (listing: TListTasksResponse) => [...listing.running, ...listing.finished];

/** Lists until `pick` finds the task in the state wanted (or gives up after ~30 s). */
async function waitFor(console: ConsoleUnderTest, ref: string, wanted: (task: TTask) => boolean): Promise<TTask> {
  let last: TTask | undefined;
  for (let i = 0; i < 300; i++) {
    last = everyTask(await console.caller.tasks.list()).find((task) => task.ref === ref);
    if (last !== undefined && wanted(last)) return last;
    await sleep(100);
  }
  assert.fail(`task ${ref} never got there; last seen: ${JSON.stringify(last)}`);
}

const finished = (task: TTask) => task.state !== "running" && task.state !== "cancelling";

test("tasks: copies to an NBD export and to another SR are listed with progress, size and rate; a failure reads in words", async (t) => {
  const console = await startConsoleUnderTest(t);
  const { caller, xapi } = console;
  const vdi = await newVdi(console, 32 * MiB, "copied disk");

  // A slow remote keeps the copy running long enough to be seen running.
  const slow = await nbdkit(t, console, ["--filter=delay", "memory", "32M", "delay-write=300ms", "delay-zero=300ms"]);
  const { task: copy } = await caller.tasks.startDataTask({ target: "nbd", vdi, operation: "copy", remote: slow });
  // Until the toolstack has recorded which volume the task reads, the title cannot name it.
  const running = await waitFor(console, copy, (task) => (task.state === "running" && task.title.includes("copied")) || finished(task));
  assert.equal(running.kind, "data-copy");
  assert.equal(running.kindLabel, "Data.copy");
  assert.equal(running.title, "Copy of volume “copied disk” to an NBD export");
  if (running.state === "running") {
    assert.equal(running.canCancel, true);
    assert.equal(running.canDestroy, false);
    assert.equal(running.finished, null);
    assert.equal(running.etaS, null, "no time left is guessed in the first 10 s");
  }
  const done = await waitFor(console, copy, finished);
  assert.equal(done.state, "succeeded", JSON.stringify(done));
  assert.equal(done.progress, 1);
  assert.equal(done.totalBytes, 32 * MiB);
  assert.ok(done.rateBytesPerS !== null && done.rateBytesPerS > 0, `a rate: ${done.rateBytesPerS}`);
  assert.ok(done.finished !== null && done.durationS > 0);
  assert.equal(done.error, null);
  assert.equal(done.canCancel, false);
  assert.equal(done.canDestroy, true);

  // VDI.copy to another SR: a new volume there, through Data.copy.
  const [host] = await xapi.call(z.array(z.string()), "host.get_all");
  const other = await xapi.call(z.string(), "SR.create", host, { path: join(console.toolstack.dataDir, "other-sr") }, 0, "other", "", "file", "user", false, {});
  const sources = await caller.tasks.copySources();
  assert.deepEqual(
    sources.srs.find((sr) => sr.ref === other),
    { ref: other, name: "other", type: "file", isDefault: false, problem: null, volumes: [] },
  );
  assert.ok(sources.srs.some((sr) => sr.isDefault && sr.volumes.some((v) => v.ref === vdi && v.name === "copied disk" && v.virtualSize === 32 * MiB)));
  const { task: toSr } = await caller.tasks.startDataTask({ target: "sr", vdi, operation: "copy", sr: other });
  const copied = await waitFor(console, toSr, finished);
  assert.equal(copied.state, "succeeded", JSON.stringify(copied));
  assert.equal(copied.kind, "vdi-copy");
  assert.equal(copied.name, "Async.VDI.copy");
  assert.equal(copied.totalBytes, 32 * MiB);
  assert.ok(copied.rateBytesPerS !== null && copied.rateBytesPerS > 0);
  assert.equal((await xapi.call(z.array(z.string()), "SR.get_VDIs", other)).length, 1, "the copy is in the other SR");
  await assert.rejects(caller.tasks.startDataTask({ target: "sr", vdi, operation: "copy", sr: await defaultSr(console) }), /another SR/);

  // A mirror into an existing volume of the other SR runs until cancelled.
  const target = await xapi.call(z.string(), "VDI.create", { SR: other, virtual_size: 32 * MiB, name_label: "mirror target" });
  await assert.rejects(caller.tasks.startDataTask({ target: "vdi", vdi, operation: "mirror", dest: vdi }), /another volume than the source/);
  const { task: into } = await caller.tasks.startDataTask({ target: "vdi", vdi, operation: "mirror", dest: target });
  const mirroring = await waitFor(console, into, (task) => (task.state === "running" && task.title.includes("target")) || finished(task));
  assert.equal(mirroring.state, "running", JSON.stringify(mirroring));
  assert.equal(mirroring.kind, "data-mirror");
  assert.equal(mirroring.title, "Mirror of volume “copied disk” into volume “mirror target”");
  await caller.tasks.cancel({ ref: into });
  assert.equal((await waitFor(console, into, finished)).state, "cancelled");

  // A remote nobody serves: the copy fails, and the list says why in words.
  const nowhere = `nbd+unix:///?socket=${join(console.toolstack.dataDir, "nobody-listens.sock")}`;
  const { task: failing } = await caller.tasks.startDataTask({ target: "nbd", vdi, operation: "copy", remote: nowhere });
  const failed = await waitFor(console, failing, finished);
  assert.equal(failed.state, "failed");
  assert.equal(failed.errorCode, "SR_BACKEND_FAILURE");
  assert.match(failed.error!, /^The storage plugin failed: .*nobody-listens\.sock/);
  assert.doesNotMatch(failed.error!, /\n\s+at /, "no stack trace");
  assert.equal(failed.rateBytesPerS, null);

  // The list: running first, then the most recently finished (times are to the second, so only their order is
  // checked, not which of two tasks finished in the same second comes first).
  const listing = await caller.tasks.list();
  const mine = listing.finished.filter((task) => [copy, toSr, into, failing].includes(task.ref));
  assert.equal(mine.length, 4);
  const finishedTimes = mine.map((task) => task.finished!);
  assert.deepEqual(finishedTimes, finishedTimes.toSorted().reverse());
  assert.equal(mine.at(-1)!.ref, copy);
  assert.ok(listing.totalFinished >= 4);

  // Filtered and paged by the toolstack: by state, by text (a data task's description names its volume).
  const failures = await caller.tasks.list({ status: "failed" });
  assert.deepEqual(failures.finished.map((task) => task.ref), [failing]);
  assert.equal(failures.totalFinished, 1);
  const byVolume = await caller.tasks.list({ text: "COPIED DISK" });
  assert.deepEqual(new Set(byVolume.finished.map((task) => task.ref)), new Set([copy, toSr, into, failing]));
  assert.equal((await caller.tasks.list({ text: "mirror target", status: "cancelled" })).totalFinished, 1);
  const second = await caller.tasks.list({ offset: 1, limit: 1 });
  assert.deepEqual(second.finished.map((task) => task.ref), [listing.finished[1]!.ref]);
  assert.equal(second.totalFinished, listing.totalFinished);
  await assert.rejects(caller.tasks.list({ limit: 501 }), (error: unknown) => error instanceof TRPCError && error.code === "BAD_REQUEST");

  // A URI that is no NBD URI is refused before anything starts.
  await assert.rejects(caller.tasks.startDataTask({ target: "nbd", vdi, operation: "copy", remote: "http://example.com/disk" }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "BAD_REQUEST");
    return true;
  });
});

test("tasks: a mirror runs until cancelled; a finished task leaves the history; a running one cannot", async (t) => {
  const console = await startConsoleUnderTest(t);
  const { caller } = console;
  const vdi = await newVdi(console, 16 * MiB);
  const remote = await nbdkit(t, console, ["memory", "16M"]);
  const { task: mirror } = await caller.tasks.startDataTask({ target: "nbd", vdi, operation: "mirror", remote });
  const running = await waitFor(console, mirror, (task) => task.state === "running");
  assert.equal(running.kind, "data-mirror");
  assert.equal(running.totalBytes, null, "a mirror has no total");
  assert.equal(running.rateBytesPerS, null);
  assert.equal(running.etaS, null, "a mirror never ends by itself");
  assert.equal(running.canCancel, true);
  await sleep(1500);
  assert.equal((await waitFor(console, mirror, () => true)).state, "running", "still mirroring");

  await assert.rejects(caller.tasks.destroy({ ref: mirror }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.match(error.message, /^Not allowed now/);
    return true;
  });
  await caller.tasks.cancel({ ref: mirror });
  const cancelled = await waitFor(console, mirror, finished);
  assert.equal(cancelled.state, "cancelled");
  assert.equal(cancelled.canCancel, false);
  assert.equal(cancelled.error, null);
  await assert.rejects(caller.tasks.cancel({ ref: mirror }), /Not allowed now/);

  await caller.tasks.destroy({ ref: mirror });
  assert.equal(everyTask(await caller.tasks.list()).find((task) => task.ref === mirror), undefined);
  await assert.rejects(caller.tasks.destroy({ ref: mirror }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "NOT_FOUND");
    return true;
  });
});

test("tasks: a caller without a session is refused everything", async (t) => {
  const { anonymous } = await startConsoleUnderTest(t);
  const refused = (error: unknown) => error instanceof TRPCError && error.code === "UNAUTHORIZED";
  await assert.rejects(anonymous.tasks.list(), refused);
  await assert.rejects(anonymous.tasks.copySources(), refused);
  await assert.rejects(anonymous.tasks.cancel({ ref: "OpaqueRef:1" }), refused);
  await assert.rejects(anonymous.tasks.destroy({ ref: "OpaqueRef:1" }), refused);
  await assert.rejects(anonymous.tasks.startDataTask({ target: "nbd", vdi: "OpaqueRef:1", operation: "copy", remote: "nbd://localhost/x" }), refused);
});
