// The object store's lookups beside the records, on both engines: refs without records, counts kept per class
// (and per class and status), tasks' expiry and status kept on every write, so housekeeping finds expired tasks
// and a page of tasks is found and counted without reading the others.
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { migrate } from "./db/migrations.ts";
import { bothEngines, countingRecords, type CountingDatabase, type TestEngine } from "./db/testing.ts";
import { EventLog } from "./events.ts";
import { ObjectStore, registerStoredClasses } from "./objects.ts";
import { FINISHED_TASK_TTL_MS } from "./task-expiry.ts";
import { xenDate, type XenRecord } from "../xenapi/values.ts";

const engines = bothEngines();

async function openStore(t: TestContext, engine: TestEngine): Promise<{ db: CountingDatabase; events: EventLog; objects: ObjectStore }> {
  const db = countingRecords(engine.open(await engine.place(t)));
  t.after(() => db.close());
  await migrate(db);
  const events = new EventLog(db);
  const objects = new ObjectStore(db, events);
  registerStoredClasses(events, objects, "task", "VM");
  return { db, events, objects };
}

const record = (name: string, extra: XenRecord = {}): XenRecord => ({ uuid: crypto.randomUUID(), name_label: name, ...extra });
const at = (ms: number) => xenDate(new Date(ms));
const expiresOf = async (db: CountingDatabase, ref: string) => (await db.get<{ expires: number | null }>("SELECT expires FROM objects WHERE ref = ?", [ref]))!.expires;

for (const engine of engines)
describe(`object store on ${engine.name}`, () => {
  test("refs(): a class's refs in the order of all(), without reading a record", async (t) => {
    const { db, objects } = await openStore(t, engine);
    for (let i = 0; i < 20; i++) await objects.create("task", record(`t${i}`));
    await objects.create("VM", record("vm"));
    const all = (await objects.all("task")).map((o) => o.ref);
    db.reset();
    assert.deepEqual(await objects.refs("task"), all);
    assert.equal(db.seen.records, 0);
  });

  test("count(): kept per class by create and destroy, rolled back with the transaction; no COUNT(*)", async (t) => {
    const { db, objects } = await openStore(t, engine);
    const vms = [await objects.create("VM", record("a")), await objects.create("VM", record("b"))];
    await objects.create("task", record("t"));
    await objects.destroy("VM", vms[0]!.ref);
    await assert.rejects(
      db.transaction(async (tx) => {
        await objects.create("VM", record("c"), { db: tx });
        throw new Error("undone");
      }),
      /undone/,
    );
    db.reset();
    assert.deepEqual([await objects.count("VM"), await objects.count("task"), await objects.count("SR")], [1, 1, 0]);
    assert.ok(!db.seen.statements.some((sql) => /COUNT\(/i.test(sql)), db.seen.statements.join("\n"));
  });

  test("a task's expiry follows its record, whoever writes it: made + TTL while pending, finished + TTL after", async (t) => {
    const { db, objects } = await openStore(t, engine);
    const made = Date.parse("2026-01-01T00:00:00Z");
    const task = await objects.create("task", record("t", { status: "pending", created: at(made), finished: at(0) }));
    assert.equal(await expiresOf(db, task.ref), made + FINISHED_TASK_TTL_MS);
    await objects.set("task", task.ref, { status: "success", finished: at(made + 5000) });
    assert.equal(await expiresOf(db, task.ref), made + 5000 + FINISHED_TASK_TTL_MS);
    await objects.set("task", task.ref, { finished: "garbage" });
    assert.equal(await expiresOf(db, task.ref), null, "no valid date: kept, as before");
    const vm = await objects.create("VM", record("vm", { created: at(made) }));
    assert.equal(await expiresOf(db, vm.ref), null, "only tasks expire");
  });

  test("expired(): pages of refs by expiry then ref, read through the index; destroyExpired() rechecks each", async (t) => {
    const { db, events, objects } = await openStore(t, engine);
    const now = Date.parse("2026-02-01T00:00:00Z");
    const old = at(now - FINISHED_TASK_TTL_MS - 60_000);
    const expired: string[] = [];
    for (let i = 0; i < 5; i++) expired.push((await objects.create("task", record(`old${i}`, { status: "success", finished: old }))).ref);
    const older = (await objects.create("task", record("older", { status: "failure", finished: at(now - 2 * FINISHED_TASK_TTL_MS) }))).ref;
    await objects.create("task", record("recent", { status: "success", finished: at(now - 1000) }));
    await objects.create("task", record("pending", { status: "pending", created: at(now - 1000) }));
    db.reset();
    const pages: string[][] = [];
    for (let page = await objects.expired("task", now, 2); page.length > 0; page = await objects.expired("task", now, 2, page.at(-1))) {
      pages.push(page.map((e) => e.ref));
    }
    assert.equal(db.seen.records, 0);
    const equalExpiry = [...expired].sort((a, b) => (a < b ? -1 : 1));
    assert.deepEqual(pages.flat(), [older, ...equalExpiry], "oldest first; equal expiries by ref, none skipped or repeated");
    assert.deepEqual(pages.map((p) => p.length), [2, 2, 2]);

    // One finished again since it was listed (a client's set_status): no longer expired, it stays.
    await objects.set("task", expired[0]!, { finished: at(now) });
    const start = await events.currentToken();
    db.reset();
    assert.equal(await objects.destroyExpired("task", [...expired, older], now), 5);
    assert.equal(db.seen.records, 6, "only the listed ones are read");
    assert.deepEqual(await objects.expired("task", now, 10), []);
    assert.equal((await objects.find("task", expired[0]!))?.record.name_label, "old0");
    assert.equal(await objects.count("task"), 3);
    const batch = await events.from(["task"], start, 0);
    assert.deepEqual(
      (batch.events as Array<{ operation: string }>).map((e) => e.operation),
      Array(5).fill("del"),
    );
  });

  test("count() by status: kept by create, update and destroy as a task's status changes", async (t) => {
    const { db, objects } = await openStore(t, engine);
    const a = await objects.create("task", record("a", { status: "pending" }));
    const b = await objects.create("task", record("b", { status: "pending" }));
    await objects.set("task", a.ref, { status: "success" });
    await objects.set("task", a.ref, { progress: 1 });
    await objects.set("task", b.ref, { status: "cancelling" });
    await objects.set("task", b.ref, { status: "cancelled" });
    await objects.create("task", record("c", { status: "failure" }));
    await objects.destroy("task", a.ref);
    await objects.create("VM", record("vm", { status: "not a task's" }));
    db.reset();
    const counts = await Promise.all([["pending"], ["cancelling"], ["success"], ["failure", "cancelled"], []].map((statuses) => objects.count("task", statuses)));
    assert.deepEqual(counts, [0, 0, 0, 2, 0]);
    assert.equal(await objects.count("VM", ["not a task's"]), 0, "only tasks are counted by status");
    assert.ok(!db.seen.statements.some((sql) => /COUNT\(/i.test(sql)), db.seen.statements.join("\n"));
  });

  test("pageByStatus(): latest expiry first, filtered by status and text, totals, no record read", async (t) => {
    const { db, objects } = await openStore(t, engine);
    const base = Date.parse("2026-03-01T00:00:00Z");
    const made: Record<string, string> = {};
    const statuses = ["success", "failure", "cancelled", "success", "success"];
    // Finished a second apart, t0 first; t7 and t8 in the same second (ties: the greater ref first).
    for (let i = 0; i < 10; i++) {
      const finished = at(base + Math.min(i, 7) * 1000);
      made[`t${i}`] = (await objects.create("task", record(`Async.VDI.copy t${i}`, { status: statuses[i % 5]!, created: at(base - 60_000), finished, name_description: i === 4 ? "Copy of volume “Web DB”" : "" }))).ref;
    }
    const running = (await objects.create("task", record("running", { status: "pending", created: at(base) }))).ref;
    // No valid finished date: never expires, listed after every other.
    const undated = (await objects.create("task", record("undated", { status: "success", created: at(base), finished: at(0) }))).ref;
    const names = async (refs: string[]) => (await objects.many("task", refs)).map((o) => String(o.record.name_label).replace("Async.VDI.copy ", ""));
    const FINISHED = ["success", "failure", "cancelled"];

    db.reset();
    const first = await objects.pageByStatus("task", { statuses: FINISHED, offset: 0, limit: 4 });
    assert.equal(db.seen.records, 0, "refs and totals without records");
    assert.equal(first.total, 11);
    const tied = [made.t7!, made.t8!, made.t9!].sort().reverse();
    assert.deepEqual(first.refs, [...tied, made.t6]);
    const rest = await objects.pageByStatus("task", { statuses: FINISHED, offset: 4, limit: 100 });
    assert.deepEqual(await names(rest.refs), ["t5", "t4", "t3", "t2", "t1", "t0", "undated"]);
    assert.deepEqual((await objects.pageByStatus("task", { statuses: FINISHED, offset: 9, limit: 5 })).refs, [made.t0, undated]);
    assert.deepEqual((await objects.pageByStatus("task", { statuses: FINISHED, offset: 10, limit: 5 })).refs, [undated], "a page of the undated only");
    assert.deepEqual(await objects.pageByStatus("task", { statuses: FINISHED, offset: 20, limit: 5 }), { refs: [], total: 11 });
    assert.deepEqual(await objects.pageByStatus("task", { statuses: FINISHED, offset: 0, limit: 0 }), { refs: [], total: 11 });

    const failed = await objects.pageByStatus("task", { statuses: ["failure"], offset: 0, limit: 10 });
    assert.deepEqual(await names(failed.refs), ["t6", "t1"]);
    assert.equal(failed.total, 2);
    assert.deepEqual(await objects.pageByStatus("task", { statuses: ["pending", "cancelling"], offset: 0, limit: 10 }), { refs: [running], total: 1 });

    // Text: in name_label or name_description, case aside; LIKE's own characters are plain text.
    assert.deepEqual(await objects.pageByStatus("task", { statuses: FINISHED, text: " web db ", offset: 0, limit: 10 }), { refs: [made.t4], total: 1 });
    const t1s = await objects.pageByStatus("task", { statuses: FINISHED, text: "T1", offset: 0, limit: 10 });
    assert.deepEqual(await names(t1s.refs), ["t1"]);
    assert.equal((await objects.pageByStatus("task", { statuses: ["success"], text: "COPY T", offset: 1, limit: 2 })).total, 6);
    assert.deepEqual(await objects.pageByStatus("task", { statuses: FINISHED, text: "%", offset: 0, limit: 10 }), { refs: [], total: 0 });
    assert.deepEqual(await objects.pageByStatus("task", { statuses: FINISHED, text: "t_", offset: 0, limit: 10 }), { refs: [], total: 0 });

    // many(): in the order asked, those gone left out, only those read.
    await objects.destroy("task", made.t2!);
    db.reset();
    assert.deepEqual(await names([made.t3!, made.t2!, made.t0!]), ["t3", "t0"]);
    assert.equal(db.seen.records, 2);
  });
});
