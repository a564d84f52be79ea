// The object store's lookups beside the records, on both engines: refs without records, counts kept per class,
// and tasks' expiry kept on every write, so housekeeping finds expired tasks without reading the others.
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
});
