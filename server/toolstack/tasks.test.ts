// Tasks as xapi keeps them: pending → success (result XML-RPC encoded) | failure (error_info) | cancelled;
// clients' own tasks (task.create) they finish themselves; 24 h retention; after a restart, pending tasks
// nothing runs any more are failed with the reason.
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test } from "node:test";
import { StorageError } from "../storage/errors.ts";
import { openSqlite } from "./db/sqlite.ts";
import { countingRecords } from "./db/testing.ts";
import { FINISHED_TASK_TTL_MS, TASK_KIND_KEY } from "./tasks.ts";
import { openTestToolstack, ROOT_PASSWORD, tempDataDir } from "./testing.ts";
import { openToolstack, type Toolstack } from "./toolstack.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { invoke, method } from "./methods.ts";
import { audited } from "./rbac/audit.ts";
import { zString } from "../xenapi/params.ts";
import { XenDouble, xenDate, type XenRecord } from "../xenapi/values.ts";
import { parseXmlRpcValue } from "../xenapi/xml-rpc.ts";

const xenError = (code: string) => (error: unknown) => error instanceof XenApiError && error.code === code;

async function login(ts: Toolstack): Promise<string> {
  return String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
}

const taskRecord = async (ts: Toolstack, ref: string) => (await ts.objects.get("task", ref)).record;

/** Polls until the task leaves pending / cancelling (tasks finish in the background). */
async function finished(ts: Toolstack, ref: string): Promise<XenRecord> {
  for (let waited = 0; waited < 5000; waited += 10) {
    const record = await taskRecord(ts, ref);
    if (record.status !== "pending" && record.status !== "cancelling") return record;
    await sleep(10);
  }
  throw new Error(`task ${ref} did not finish`);
}

describe("tasks", () => {
  test("stop(): work bound to the process is stopped, undoes itself and fails interrupted; other work is left to run", async (t) => {
    const ts = await openTestToolstack(t);
    let undone = false;
    const bound = await ts.tasks.create({ name_label: "upload" });
    void ts.tasks.run(
      bound,
      async (control) => {
        await new Promise((resolve) => control.signal.addEventListener("abort", resolve));
        undone = true;
        throw control.signal.reason;
      },
      { boundToProcess: true },
    );
    let release = () => {};
    const other = await ts.tasks.start("copy", (control) => new Promise((resolve, reject) => {
      release = () => resolve(undefined);
      control.signal.addEventListener("abort", () => reject(new Error("stopped")));
    }));
    await ts.tasks.stop(5000);
    assert.ok(undone);
    const record = await taskRecord(ts, bound);
    assert.equal(record.status, "failure");
    assert.deepEqual(record.error_info, ["TASK_INTERRUPTED", bound, "the toolstack stopped while the task ran; what it had made was removed"]);
    assert.equal((await taskRecord(ts, other)).status, "pending");
    release();
    assert.equal((await finished(ts, other)).status, "success");
  });

  test("success: status, progress 1, finished time, the result XML-RPC encoded, no operations left", async (t) => {
    const ts = await openTestToolstack(t);
    const ref = await ts.tasks.start("copy", async () => ({ vdi: "OpaqueRef:new", size: 10737418240 }));
    const record = await finished(ts, ref);
    assert.equal(record.status, "success");
    assert.equal(record.progress, 1);
    assert.deepEqual(parseXmlRpcValue(String(record.result)), { vdi: "OpaqueRef:new", size: "10737418240" });
    assert.deepEqual(record.error_info, []);
    assert.deepEqual(record.allowed_operations, []);
    assert.match(String(record.finished), /^\d{8}T\d{2}:\d{2}:\d{2}Z$/);
    assert.ok(String(record.finished) >= String(record.created));
    const empty = await finished(ts, await ts.tasks.start("no result", async () => undefined));
    assert.equal(empty.result, "");
  });

  test("failure: error_info is [code, params...]; plugin errors and bugs are reported as xapi would", async (t) => {
    const ts = await openTestToolstack(t);
    const outcomes = await Promise.all(
      [
        new XenApiError("VDI_IN_USE", ["OpaqueRef:v", "destroy"]),
        new StorageError("Volume_does_not_exist", ["v1"]),
        new TypeError("x is undefined"),
      ].map(async (thrown) => finished(ts, await ts.tasks.start("fails", async () => Promise.reject(thrown)))),
    );
    assert.deepEqual(
      outcomes.map((r) => [r.status, r.error_info]),
      [
        ["failure", ["VDI_IN_USE", "OpaqueRef:v", "destroy"]],
        ["failure", ["SR_BACKEND_FAILURE", "Volume_does_not_exist", "v1"]],
        ["failure", ["INTERNAL_ERROR", "x is undefined"]],
      ],
    );
  });

  test("progress is recorded (at most every 250 ms, and always the last) and presented as a float", async (t) => {
    const ts = await openTestToolstack(t);
    const session = await login(ts);
    let step!: (fraction: number) => void;
    let finish!: () => void;
    const done = new Promise<void>((resolve) => (finish = resolve));
    const ref = await ts.tasks.start("copy", async (control) => {
      step = control.progress;
      await done;
      return undefined;
    });
    step(0.25);
    await sleep(20);
    assert.equal((await taskRecord(ts, ref)).progress, 0.25);
    step(0.5); // within 250 ms of the last write: skipped
    await sleep(20);
    assert.equal((await taskRecord(ts, ref)).progress, 0.25);
    await sleep(260);
    step(0.75);
    await sleep(20);
    const presented = await invoke(ts, "task.get_progress", [session, ref]);
    assert.ok(presented instanceof XenDouble && presented.value === 0.75);
    finish();
    assert.equal((await finished(ts, ref)).progress, 1);
  });

  test("task.cancel of running work: cancelling, the work's signal fires, then cancelled with TASK_CANCELLED", async (t) => {
    const ts = await openTestToolstack(t);
    const session = await login(ts);
    let observed = "";
    const ref = await ts.tasks.start("long copy", (control) =>
      new Promise((_resolve, reject) => {
        control.signal.addEventListener("abort", () => {
          observed = "aborted";
          setTimeout(() => reject(control.signal.reason), 50);
        });
      }),
    );
    await invoke(ts, "task.cancel", [session, ref]);
    assert.equal(observed, "aborted");
    assert.equal((await taskRecord(ts, ref)).status, "cancelling");
    const record = await finished(ts, ref);
    assert.equal(record.status, "cancelled");
    assert.deepEqual(record.error_info, ["TASK_CANCELLED", ref]);
    await assert.rejects(invoke(ts, "task.cancel", [session, ref]), xenError("OPERATION_NOT_ALLOWED"));
  });

  test("work that finishes anyway after a cancel still ends cancelled", async (t) => {
    const ts = await openTestToolstack(t);
    const ref = await ts.tasks.start("stubborn", async () => {
      await sleep(50);
      return "done regardless";
    });
    await ts.tasks.cancel(ref);
    assert.equal((await finished(ts, ref)).status, "cancelled");
  });

  test("a client's own task (task.create): its progress and status as it sets them; cancelled at once by task.cancel", async (t) => {
    const ts = await openTestToolstack(t);
    const session = await login(ts);
    const ref = String(await invoke(ts, "task.create", [session, "Xapi#putResource /import", "upload"]));
    const record = (await invoke(ts, "task.get_record", [session, ref])) as XenRecord;
    assert.equal(record.status, "pending");
    assert.equal(record.name_label, "Xapi#putResource /import");
    assert.equal(record.name_description, "upload");
    assert.equal(record.resident_on, ts.host.ref);
    assert.deepEqual(record.allowed_operations, ["cancel"]);
    await invoke(ts, "task.cancel", [session, ref]);
    assert.equal(await invoke(ts, "task.get_status", [session, ref]), "cancelled");

    const own = String(await invoke(ts, "task.create", [session, "mine", ""]));
    await invoke(ts, "task.set_progress", [session, own, 0.5]);
    assert.deepEqual(await invoke(ts, "task.get_progress", [session, own]), new XenDouble(0.5));
    await assert.rejects(invoke(ts, "task.set_progress", [session, own, 1.5]), xenError("INVALID_VALUE"));
    await invoke(ts, "task.set_status", [session, own, "success"]);
    const ended = await taskRecord(ts, own);
    assert.equal(ended.status, "success");
    assert.notEqual(ended.finished, xenDate(new Date(0)), "stamped finished now");
    assert.deepEqual(ended.allowed_operations, []);
    assert.equal(await ts.tasks.collect(), 0, "kept 24 h from now, not collected as finished in 1970");
    await assert.rejects(invoke(ts, "task.set_status", [session, own, "done"]), xenError("INVALID_VALUE"));
  });

  test("task.destroy: a finished or client-made task goes (HANDLE_INVALID after); running work must be cancelled first", async (t) => {
    const ts = await openTestToolstack(t);
    const session = await login(ts);
    let finish!: () => void;
    const running = await ts.tasks.start("busy", () => new Promise<undefined>((resolve) => (finish = () => resolve(undefined))));
    await assert.rejects(invoke(ts, "task.destroy", [session, running]), xenError("OPERATION_NOT_ALLOWED"));
    finish();
    await finished(ts, running);
    await invoke(ts, "task.destroy", [session, running]);
    await assert.rejects(invoke(ts, "task.get_record", [session, running]), xenError("HANDLE_INVALID"));
    const own = String(await invoke(ts, "task.create", [session, "mine", ""]));
    await invoke(ts, "task.destroy", [session, own]);
    assert.deepEqual(await invoke(ts, "task.get_all", [session]), []);
  });

  test("work whose task was destroyed under it ends quietly", async (t) => {
    const ts = await openTestToolstack(t);
    const ref = await ts.tasks.start("orphan", async () => {
      await sleep(30);
      return "late";
    });
    await ts.objects.destroy("task", ref);
    await sleep(60);
    assert.equal(await ts.objects.find("task", ref), undefined);
  });

  test("Async.<call> runs the call in a task answered at once; wrong calls fail before any task exists", async (t) => {
    const ts = await openTestToolstack(t);
    ts.methods.add(
      method("test.echo_slowly", [["text", zString]], async ({ task }, text) => {
        task?.progress(0.5);
        await sleep(50);
        return `${text}!`;
      }, { role: "read-only" }),
    );
    const session = await login(ts);
    const began = Date.now();
    const ref = String(await invoke(ts, "Async.test.echo_slowly", [session, "hi"]));
    assert.ok(Date.now() - began < 50, "the task ref comes back before the work is done");
    const record = await finished(ts, ref);
    assert.equal(record.name_label, "Async.test.echo_slowly");
    assert.equal(parseXmlRpcValue(String(record.result)), "hi!");
    await assert.rejects(invoke(ts, "Async.test.echo_slowly", [session, 5]), xenError("FIELD_TYPE_ERROR"));
    await assert.rejects(invoke(ts, "Async.task.get_record", [session, ref]), xenError("MESSAGE_METHOD_UNKNOWN"));
    assert.equal((await ts.objects.all("task")).length, 1);
  });

  test("collection: finished tasks go 24 h after finishing, pending ones 24 h after creation, running ones stay", async (t) => {
    const ts = await openTestToolstack(t);
    const now = Date.now();
    const old = xenDate(new Date(now - FINISHED_TASK_TTL_MS - 60_000));
    const recent = xenDate(new Date(now - FINISHED_TASK_TTL_MS + 60_000));
    const made = async (name: string, fields: XenRecord) => {
      const ref = await ts.tasks.create({ name_label: name });
      await ts.objects.set("task", ref, fields);
      return ref;
    };
    await made("finished long ago", { status: "success", created: old, finished: old });
    const kept = [
      await made("finished lately", { status: "failure", created: old, finished: recent }),
      await made("pending, made lately", { status: "pending", created: recent }),
    ];
    await made("pending, made long ago", { status: "pending", created: old });
    let finish!: () => void;
    const running = await ts.tasks.start("running long", () => new Promise<undefined>((resolve) => (finish = () => resolve(undefined))));
    await ts.objects.set("task", running, { created: old });
    assert.equal(await ts.tasks.collect(now), 2);
    assert.deepEqual((await ts.objects.all("task")).map((o) => o.ref).sort(), [...kept, running].sort());
    finish();
    await finished(ts, running);
  });

  test("collection reads only the tasks that expired, however many others there are", async (t) => {
    const db = countingRecords(openSqlite(":memory:"));
    const ts = await openTestToolstack(t, { database: db });
    const now = Date.now();
    const old = xenDate(new Date(now - FINISHED_TASK_TTL_MS - 60_000));
    for (let i = 0; i < 50; i++) await ts.tasks.succeed(await ts.tasks.create({ name_label: `lately ${i}` }), "done");
    const expired = [];
    for (let i = 0; i < 3; i++) {
      const ref = await ts.tasks.create({ name_label: `long ago ${i}` });
      await invoke(ts, "task.set_status", [await login(ts), ref, "failure"]);
      await ts.objects.set("task", ref, { finished: old });
      expired.push(ref);
    }
    db.reset();
    assert.equal(await ts.tasks.collect(now), 3);
    assert.equal(db.seen.records, 3, "each expired task read once, to destroy it; none of the 50 others");
    assert.equal(await ts.objects.count("task"), 50);
    db.reset();
    assert.equal(await ts.tasks.collect(now), 0);
    assert.equal(db.seen.records, 0);
  });

  test("collection goes in batches, past expired tasks still running here, to the last expired one", async (t) => {
    const ts = await openTestToolstack(t);
    const now = Date.now();
    const old = xenDate(new Date(now - FINISHED_TASK_TTL_MS - 60_000));
    const finishes: Array<() => void> = [];
    const running = [];
    for (let i = 0; i < 3; i++) {
      const ref = await ts.tasks.start(`running ${i}`, () => new Promise<undefined>((resolve) => finishes.push(() => resolve(undefined))));
      await ts.objects.set("task", ref, { created: xenDate(new Date(now - FINISHED_TASK_TTL_MS - 120_000)) });
      running.push(ref);
    }
    for (let i = 0; i < 5; i++) await ts.objects.set("task", await ts.tasks.create({ name_label: `old ${i}` }), { status: "success", finished: old });
    assert.equal(await ts.tasks.collect(now, 2), 5);
    assert.deepEqual((await ts.objects.refs("task")).sort(), [...running].sort());
    for (const finish of finishes) finish();
    for (const ref of running) await finished(ts, ref);
  });

  test("task.get_all answers the refs as get_all_records orders them, reading no record", async (t) => {
    const db = countingRecords(openSqlite(":memory:"));
    const ts = await openTestToolstack(t, { database: db });
    const session = await login(ts);
    for (let i = 0; i < 20; i++) await ts.tasks.create({ name_label: `t${i}` });
    const records = Object.keys((await invoke(ts, "task.get_all_records", [session])) as Record<string, unknown>);
    db.reset();
    assert.deepEqual(await invoke(ts, "task.get_all", [session]), records);
    assert.equal(db.seen.records, 0);
  });

  test("task.hangar_get_page: the running tasks and one page of the finished ones, filtered, with totals, reading only that page", async (t) => {
    const db = countingRecords(openSqlite(":memory:"));
    const ts = await openTestToolstack(t, { database: db });
    const session = await login(ts);
    const base = Date.now() - 60 * 60_000;
    const outcomes = ["success", "failure", "cancelled"];
    const finished: string[] = [];
    for (let i = 0; i < 30; i++) {
      const ref = await ts.tasks.create({ name_label: i % 10 === 3 ? `Async.VM.import ${i}` : `Async.VDI.copy ${i}`, name_description: i === 7 ? "Copy of volume “Accounts”" : "" });
      await ts.objects.set("task", ref, { status: outcomes[i % 3]!, progress: 1, finished: xenDate(new Date(base + i * 1000)), allowed_operations: [] });
      finished.push(ref);
    }
    const newestFirst = finished.toReversed();
    const running = [await ts.tasks.create({ name_label: "upload one" }), await ts.tasks.create({ name_label: "upload two" })];
    await ts.objects.set("task", running[0]!, { status: "cancelling", created: xenDate(new Date(base)) });
    type Entry = { ref: string; record: XenRecord };
    type Page = { running: Entry[]; finished: Entry[]; total_running: number; total_finished: number };
    const page = async (query: Record<string, unknown>) => (await invoke(ts, "task.hangar_get_page", [session, query])) as Page;

    db.reset();
    const first = await page({ limit: 10 });
    assert.equal(db.seen.records, 12, "the page's 10 and the 2 running, none of the others");
    assert.deepEqual(first.finished.map((e) => e.ref), newestFirst.slice(0, 10));
    assert.equal(first.total_finished, 30);
    assert.equal(first.total_running, 2);
    assert.deepEqual(first.running.map((e) => e.ref), running.toReversed(), "newest first");
    assert.equal(first.finished[0]!.record.name_label, "Async.VDI.copy 29");
    assert.ok(first.finished[0]!.record.progress instanceof XenDouble, "records as get_record presents them");
    assert.deepEqual(first.finished[0]!.record, await invoke(ts, "task.get_record", [session, newestFirst[0]]));

    const third = await page({ offset: 20, limit: 10 });
    assert.deepEqual(third.finished.map((e) => e.ref), newestFirst.slice(20, 30));
    assert.deepEqual((await page({ offset: 30 })).finished, []);
    assert.equal((await page({})).finished.length, 30, "100 by default");

    const failures = await page({ status: "failure", limit: 3 });
    assert.equal(failures.total_finished, 10);
    assert.deepEqual(failures.finished.map((e) => e.record.name_label), ["Async.VDI.copy 28", "Async.VDI.copy 25", "Async.VDI.copy 22"]);
    const imports = await page({ text: "vm.IMPORT" });
    assert.deepEqual(imports.finished.map((e) => e.record.name_label), ["Async.VM.import 23", "Async.VM.import 13", "Async.VM.import 3"]);
    assert.equal(imports.total_finished, 3);
    assert.equal((await page({ text: "import", status: "success" })).total_finished, 1);
    assert.deepEqual((await page({ text: "accounts" })).finished.map((e) => e.ref), [finished[7]], "name_description too");

    await assert.rejects(invoke(ts, "task.hangar_get_page", [session, { limit: 501 }]), xenError("INVALID_VALUE"));
    await assert.rejects(invoke(ts, "task.hangar_get_page", [session, { offset: -1 }]), xenError("INVALID_VALUE"));
    await assert.rejects(invoke(ts, "task.hangar_get_page", [session, { status: "pending" }]), xenError("INVALID_VALUE"));
    await assert.rejects(invoke(ts, "task.hangar_get_page", [session, { limit: "many" }]), xenError("FIELD_TYPE_ERROR"));
    assert.equal(ts.methods.get("task.hangar_get_page")!.role, "read-only");
    assert.equal(audited("task.hangar_get_page"), false, "a read: not audited");
  });

  test("after a restart: pending tasks nothing runs are failed with the reason; a registered kind is handed over", async (t) => {
    const dataDir = await tempDataDir();
    const first = await openToolstack({ dataDir, rootPassword: ROOT_PASSWORD });
    const session = await login(first);
    const own = String(await invoke(first, "task.create", [session, "upload", ""]));
    const interrupted = await first.tasks.start("copy", () => new Promise(() => undefined));
    const resumable = await first.tasks.start("mirror", () => new Promise(() => undefined), { other_config: { [TASK_KIND_KEY]: "mirror" } });
    const cancelling = await first.tasks.start("cancelled copy", () => new Promise(() => undefined));
    await first.tasks.cancel(cancelling);
    await first.close();

    const handedOver: string[] = [];
    const second = await openToolstack({ dataDir, rootPassword: ROOT_PASSWORD }, [
      {
        calls: [],
        start: async (ts) => ts.tasks.registerRecovery("mirror", async (ref, record) => void handedOver.push(`${ref} ${String(record.name_label)}`)),
      },
    ]);
    t.after(async () => {
      await second.close();
      await rm(dataDir, { recursive: true, force: true });
    });
    assert.deepEqual(handedOver, [`${resumable} mirror`]);
    for (const ref of [own, interrupted, cancelling]) {
      const record = await taskRecord(second, ref);
      assert.equal(record.status, "failure", String(record.name_label));
      assert.deepEqual(record.error_info, ["TASK_INTERRUPTED", ref, "the toolstack restarted while the task ran"]);
    }
    assert.equal((await taskRecord(second, resumable)).status, "pending", "the recovery owns it now");
  });

  test("work that ends after the toolstack closed does not crash the process", async (t) => {
    const dataDir = await tempDataDir();
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    const ts = await openToolstack({ dataDir, rootPassword: ROOT_PASSWORD });
    await ts.tasks.start("outlives the service", async () => {
      await sleep(50);
      return "late";
    });
    const failing = await ts.tasks.start("fails after the service", async () => {
      await sleep(50);
      throw new Error("late failure");
    });
    assert.ok(failing);
    await ts.close();
    await sleep(100); // an unhandled rejection here fails this test file
  });
});
