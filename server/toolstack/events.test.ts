// event.from as xapi's clients use it: token "" for a snapshot, then waits for changes of the classes (or
// objects) they watch; EVENTS_LOST when they fell too far behind. Events are numbered in the database, so
// another process's changes are seen too.
import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import type { Database } from "./db/database.ts";
import { migrate } from "./db/migrations.ts";
import { bothEngines, countingRecords, type TestEngine } from "./db/testing.ts";
import { EventLog } from "./events.ts";
import { ObjectStore, registerStoredClasses } from "./objects.ts";
import { openSqlite } from "./db/sqlite.ts";
import { openTestToolstack, ROOT_PASSWORD } from "./testing.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { invoke } from "./methods.ts";
import { XenDouble, type XenRecord } from "../xenapi/values.ts";

interface Log {
  db: Database;
  events: EventLog;
  objects: ObjectStore;
}

const engines = bothEngines();

async function openLog(t: TestContext, engine: TestEngine, place?: string): Promise<Log> {
  const db = engine.open(place ?? (await engine.place(t)));
  t.after(() => db.close());
  await migrate(db);
  const events = new EventLog(db);
  const objects = new ObjectStore(db, events);
  for (const cls of ["task", "VM", "SR"]) events.registerClass(cls, () => objects.all(cls));
  return { db, events, objects };
}

const record = (name: string, extra: XenRecord = {}): XenRecord => ({ uuid: crypto.randomUUID(), name_label: name, ...extra });
type Event = { id: string; class: string; operation: string; ref: string; snapshot?: XenRecord };
const summary = (events: unknown[]) => (events as Event[]).map((e) => `${e.operation} ${e.class} ${e.snapshot?.name_label ?? "-"}`);

const eventsLost = (error: unknown) => error instanceof XenApiError && error.code === "EVENTS_LOST";

for (const engine of engines)
describe(`event log on ${engine.name}`, () => {
  test("valid_ref_counts come from a class's counter when it has one: its (dear) lister is not run", async (t) => {
    const { events, objects } = await openLog(t, engine);
    let listed = 0;
    events.registerClass(
      "VDI",
      async () => {
        listed++;
        return [];
      },
      async () => 42,
    );
    const start = await events.currentToken();
    await objects.create("task", record("t"));
    assert.deepEqual((await events.from(["vdi", "task"], start, 0)).valid_ref_counts, { vdi: 42, task: 1 });
    assert.equal(listed, 0);
  });

  test('token "" for named objects ("task/<ref>") finds each by its ref: the rest of the class is not read', async (t) => {
    const db = countingRecords(engine.open(await engine.place(t)));
    t.after(() => db.close());
    await migrate(db);
    const events = new EventLog(db);
    const objects = new ObjectStore(db, events);
    registerStoredClasses(events, objects, "task", "VM");
    const tasks = [];
    for (let i = 0; i < 30; i++) tasks.push(await objects.create("task", record(`t${i}`)));
    await objects.create("VM", record("vm"));
    const [first, second] = [tasks[7]!, tasks[3]!].sort((a, b) => (a.ref < b.ref ? -1 : 1));
    db.reset();
    const batch = await events.from([`task/${second!.ref}`, `task/${first!.ref}`, "task/OpaqueRef:no-such-task", "vm"], "", 0);
    assert.deepEqual(
      (batch.events as Event[]).map((e) => `${e.class} ${e.ref}`).sort(),
      [`task ${first!.ref}`, `task ${second!.ref}`, `vm ${(await objects.refs("VM"))[0]}`].sort(),
      "a named object that does not exist contributes nothing",
    );
    assert.deepEqual((batch.events as Event[]).filter((e) => e.class === "task").map((e) => e.ref), [first!.ref, second!.ref], "in ref order, as a listing gives them");
    assert.deepEqual(batch.valid_ref_counts, { task: 30, vm: 1 });
    assert.equal(db.seen.records, 2 + 1, "the 2 tasks named that exist, the one VM listed");
    assert.ok(!db.seen.statements.some((sql) => /COUNT\(/i.test(sql)), "counts come from the counters the store keeps");
    db.reset();
    const later = await events.from([`task/${first!.ref}`], batch.token, 0);
    assert.deepEqual(later.valid_ref_counts, { task: 30 });
    assert.equal(db.seen.records, 0);
    assert.ok(!db.seen.statements.some((sql) => /COUNT\(/i.test(sql)));
    // A class subscribed to whole as well as by name is listed, as before.
    const whole = await events.from(["task", `task/${first!.ref}`], "", 0);
    assert.equal(whole.events.length, 30);
  });

  test('token "" answers the current objects as "add" events, valid_ref_counts and a token', async (t) => {
    const { events, objects } = await openLog(t, engine);
    await objects.create("VM", record("vm1"));
    await objects.create("task", record("t1", { progress: 0.5 }));
    const batch = await events.from(["VM", "task"], "", 0);
    assert.deepEqual(summary(batch.events).sort(), ["add task t1", "add vm vm1"]);
    assert.deepEqual(batch.valid_ref_counts, { vm: 1, task: 1 });
    assert.equal(batch.token, await events.currentToken());
    const task = (batch.events as Event[]).find((e) => e.class === "task")!;
    assert.ok(task.snapshot!.progress instanceof XenDouble, "records are presented as the API shows them");
  });

  test("after a token: each committed change once, in order, with its snapshot; the token moves on", async (t) => {
    const { events, objects } = await openLog(t, engine);
    const start = await events.currentToken();
    const vm = await objects.create("VM", record("a"));
    await objects.set("VM", vm.ref, { name_label: "b" });
    await objects.destroy("VM", vm.ref);
    const batch = await events.from(["vm"], start, 0);
    assert.deepEqual(summary(batch.events), ["add vm a", "mod vm b", "del vm b"]);
    const ids = (batch.events as Event[]).map((e) => Number(e.id));
    assert.deepEqual(ids, [...ids].sort((a, b) => a - b));
    assert.equal(batch.token, String(ids.at(-1)));
    assert.deepEqual((await events.from(["vm"], batch.token, 0)).events, []);
  });

  test('class filters: case-insensitive names, "*" for all, "task/<ref>" for one object, unknown classes ignored', async (t) => {
    const { events, objects } = await openLog(t, engine);
    const start = await events.currentToken();
    const mine = await objects.create("task", record("mine"));
    await objects.create("task", record("other"));
    await objects.create("SR", record("sr"));
    assert.deepEqual(summary((await events.from(["TASK"], start, 0)).events), ["add task mine", "add task other"]);
    assert.deepEqual(summary((await events.from(["*"], start, 0)).events), ["add task mine", "add task other", "add sr sr"]);
    assert.deepEqual(summary((await events.from([`task/${mine.ref}`], start, 0)).events), ["add task mine"]);
    assert.deepEqual(summary((await events.from(["Sr", "no-such-class"], start, 0)).events), ["add sr sr"]);
    assert.deepEqual(summary((await events.from([`task/${mine.ref}`], "", 0)).events), ["add task mine"], 'a snapshot of one object holds that object only');
    assert.deepEqual((await events.from(["*"], start, 0)).valid_ref_counts, { task: 2, vm: 0, sr: 1 });
  });

  test("a waiting event.from answers as soon as a matching change commits; changes of other classes do not end the wait", async (t) => {
    const { events, objects } = await openLog(t, engine);
    const vm = await objects.create("VM", record("vm"));
    const start = await events.currentToken();
    const began = Date.now();
    const waiting = events.from(["vm"], start, 10);
    setTimeout(() => void objects.create("task", record("noise")), 50);
    setTimeout(() => void objects.set("VM", vm.ref, { name_label: "renamed" }), 150);
    const batch = await waiting;
    const waited = Date.now() - began;
    assert.deepEqual(summary(batch.events), ["mod vm renamed"]);
    assert.ok(waited >= 140 && waited < 1000, `answered after ${waited} ms`);
  });

  test("with nothing to report it answers empty at the timeout, the token past what it skipped", async (t) => {
    const { events, objects } = await openLog(t, engine);
    const start = await events.currentToken();
    await objects.create("task", record("not watched"));
    const began = Date.now();
    const batch = await events.from(["vm"], start, 0.3);
    const waited = Date.now() - began;
    assert.deepEqual(batch.events, []);
    assert.equal(batch.token, await events.currentToken());
    assert.ok(waited >= 290 && waited < 1500, `answered after ${waited} ms`);
  });

  test("a matching change behind more than a page of other changes is answered at once, not at the timeout", async (t) => {
    const { events, objects } = await openLog(t, engine);
    const vm = await objects.create("VM", record("vm"));
    const start = await events.currentToken();
    for (let i = 0; i < 2500; i++) await events.record("task", `OpaqueRef:noise-${i}`, "mod", null);
    await objects.set("VM", vm.ref, { name_label: "late" });
    const began = Date.now();
    const batch = await events.from(["vm"], start, 20);
    assert.deepEqual(summary(batch.events), ["mod vm late"]);
    assert.ok(Date.now() - began < 5000, `answered after ${Date.now() - began} ms`);
  });

  test("a token older than the events kept is EVENTS_LOST; a fresh snapshot then works", async (t) => {
    const { events, objects } = await openLog(t, engine);
    const old = await events.currentToken();
    for (let i = 0; i < 11_000; i++) await events.record("task", "OpaqueRef:busy", "mod", null);
    await assert.rejects(events.from(["task"], old, 0), eventsLost);
    await objects.create("VM", record("after"));
    const snapshot = await events.from(["vm"], "", 0);
    assert.deepEqual(summary(snapshot.events), ["add vm after"]);
    assert.deepEqual((await events.from(["vm"], snapshot.token, 0)).events, []);
  });

  test("a token that is not one is EVENT_FROM_TOKEN_PARSE_FAILURE", async (t) => {
    const { events } = await openLog(t, engine);
    for (const token of ["abc", "-1", "1.5"]) {
      await assert.rejects(events.from(["*"], token, 0), (error) => error instanceof XenApiError && error.code === "EVENT_FROM_TOKEN_PARSE_FAILURE" && error.params[0] === token);
    }
  });

  test("changes committed by another process on the same database are seen by a waiting reader", async (t) => {
    const place = await engine.place(t);
    const reader = await openLog(t, engine, place);
    const writer = await openLog(t, engine, place);
    const start = await reader.events.currentToken();
    const waiting = reader.events.from(["vm"], start, 10);
    setTimeout(() => void writer.objects.create("VM", record("elsewhere")), 100);
    const began = Date.now();
    assert.deepEqual(summary((await waiting).events), ["add vm elsewhere"]);
    assert.ok(Date.now() - began < 3000);
  });
});

describe("event calls", () => {
  test("event.inject answers a token whose next event.from holds the injected event (a barrier)", async (t) => {
    const ts = await openTestToolstack(t);
    const session = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    const token = String(await invoke(ts, "event.inject", [session, "pool", ts.poolRef]));
    const began = Date.now();
    const batch = (await invoke(ts, "event.from", [session, ["pool"], token, 30])) as { events: Event[]; token: string };
    assert.ok(Date.now() - began < 1000, "answered at once");
    assert.deepEqual(batch.events.map((e) => [e.class, e.operation, e.ref]), [["pool", "mod", ts.poolRef]]);
    assert.ok(Number(batch.token) > Number(token));
  });

  test('event.from(["task/<ref>"], "") as XenApiClient.waitTask first calls it reads that task only', async (t) => {
    const db = countingRecords(openSqlite(":memory:"));
    const ts = await openTestToolstack(t, { database: db });
    const session = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    const refs = [];
    for (let i = 0; i < 40; i++) refs.push(await ts.tasks.create({ name_label: `t${i}` }));
    db.reset();
    const batch = (await invoke(ts, "event.from", [session, [`task/${refs[5]}`], "", 0])) as { events: Event[]; valid_ref_counts: Record<string, number> };
    assert.deepEqual(batch.events.map((e) => [e.class, e.operation, e.ref, e.snapshot?.name_label]), [["task", "add", refs[5], "t5"]]);
    assert.equal(batch.valid_ref_counts.task, 40);
    assert.equal(db.seen.records, 1);
  });

  test("event.from over the call table: timeout given as an XML-RPC double or an int64 string; unknown class in inject", async (t) => {
    const ts = await openTestToolstack(t);
    const session = String(await invoke(ts, "session.login_with_password", ["root", ROOT_PASSWORD]));
    const snapshot = (await invoke(ts, "event.from", [session, ["host", "pool"], "", new XenDouble(0.1)])) as { events: Event[]; token: string };
    assert.deepEqual(snapshot.events.map((e) => e.class).sort(), ["host", "pool"]);
    const empty = (await invoke(ts, "event.from", [session, ["host"], snapshot.token, "0"])) as { events: Event[] };
    assert.deepEqual(empty.events, []);
    await assert.rejects(invoke(ts, "event.inject", [session, "nonsense", ts.poolRef]), (error) => error instanceof XenApiError && error.code === "INVALID_VALUE");
    assert.equal(await invoke(ts, "event.get_current_id", [session]), await ts.events.currentToken());
  });
});
