// Both engines behind the query interface, with the same tests: SQLite (embedded) and PostgreSQL (a
// throwaway cluster of Debian's server). A transaction is all or nothing, and no other transaction runs
// between its statements, however its body awaits: on PostgreSQL across separate connection pools too, as
// the hosts of a pool have.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test, type TestContext } from "node:test";
import type { Database } from "./database.ts";
import { migrate, SCHEMA_VERSION } from "./migrations.ts";
import { numberPlaceholders } from "./postgres.ts";
import { bothEngines } from "./testing.ts";

const engines = bothEngines();

for (const engine of engines) {
describe(`${engine.name} database`, () => {
async function openDb(t: TestContext): Promise<Database> {
  const db = engine.open(await engine.place(t));
  t.after(() => db.close());
  return db;
}

async function counterDb(t: TestContext): Promise<Database> {
  const db = await openDb(t);
  await db.run("CREATE TABLE IF NOT EXISTS c (name TEXT PRIMARY KEY, n BIGINT NOT NULL)");
  await db.run("INSERT INTO c (name, n) VALUES ('x', 0)");
  return db;
}

/** Rows as plain objects (node:sqlite gives them no prototype). */
const plain = (rows: object[]) => rows.map((row) => ({ ...row }));
const count = async (db: Database) => Number((await db.get<{ n: number }>("SELECT n FROM c WHERE name = 'x'"))!.n);
/** Every migration, applied once each. */
const allVersions = Array.from({ length: SCHEMA_VERSION }, (_, i) => ({ version: i + 1 }));

  test("statements with ? placeholders; run answers the rows changed", async (t) => {
    const db = await counterDb(t);
    assert.equal(await db.run("INSERT INTO c (name, n) VALUES (?, ?), (?, ?)", ["y", 1, "z", 2]), 2);
    assert.deepEqual(plain(await db.all("SELECT name, n FROM c WHERE n > ? ORDER BY name", [0])), [
      { name: "y", n: 1 },
      { name: "z", n: 2 },
    ]);
    assert.equal(await db.get("SELECT * FROM c WHERE name = ?", ["none"]), undefined);
    assert.equal(await db.run("UPDATE c SET n = n + 1"), 3);
  });

  test("a transaction commits all its changes and answers the body's value", async (t) => {
    const db = await counterDb(t);
    const answer = await db.transaction(async (tx) => {
      await tx.run("UPDATE c SET n = 5");
      await tx.run("INSERT INTO c (name, n) VALUES ('y', 6)");
      return "done";
    });
    assert.equal(answer, "done");
    assert.equal(await count(db), 5);
    assert.equal((await db.all("SELECT * FROM c")).length, 2);
  });

  test("a transaction whose body throws rolls back every change and rethrows; the next one runs", async (t) => {
    const db = await counterDb(t);
    const failure = new Error("half-way");
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.run("UPDATE c SET n = 99");
        await tx.run("INSERT INTO c (name, n) VALUES ('y', 1)");
        await sleep(5);
        throw failure;
      }),
      (error) => error === failure,
    );
    assert.equal(await count(db), 0);
    assert.equal((await db.all("SELECT * FROM c")).length, 1);
    // A statement that fails inside a transaction (a constraint) rolls back what came before it.
    await assert.rejects(
      db.transaction(async (tx) => {
        await tx.run("UPDATE c SET n = 1");
        await tx.run("INSERT INTO c (name, n) VALUES ('x', 2)");
      }),
      /UNIQUE constraint failed|duplicate key value violates unique constraint/,
    );
    assert.equal(await count(db), 0);
    await db.transaction((tx) => tx.run("UPDATE c SET n = 1"));
    assert.equal(await count(db), 1);
  });

  test("concurrent transactions never interleave: read-modify-write across awaits loses no update", async (t) => {
    const db = await counterDb(t);
    const order: string[] = [];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(async (tx) => {
          order.push(`begin ${i}`);
          const n = Number((await tx.get<{ n: number }>("SELECT n FROM c WHERE name = 'x'"))!.n);
          await sleep(i % 3); // other work gets every chance to run here
          await tx.run("UPDATE c SET n = ? WHERE name = 'x'", [n + 1]);
          order.push(`end ${i}`);
        }),
      ),
    );
    assert.equal(await count(db), 20);
    for (let i = 0; i < order.length; i += 2) assert.equal(order[i]!.replace("begin", "end"), order[i + 1], "each transaction ends before the next begins");
  });

  test("a statement issued while a transaction runs sees only committed data (on SQLite it waits for the end)", async (t) => {
    const db = await counterDb(t);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let changed!: () => void;
    const firstChange = new Promise<void>((resolve) => (changed = resolve));
    const running = db.transaction(async (tx) => {
      await tx.run("UPDATE c SET n = 1");
      changed();
      await held;
      await tx.run("UPDATE c SET n = 2");
    });
    await firstChange;
    const outside = count(db);
    const settled = await Promise.race([outside.then(() => "answered"), sleep(50).then(() => "waiting")]);
    if (engine.name === "SQLite") assert.equal(settled, "waiting", "the read waits for the transaction");
    release();
    await running;
    assert.ok([0, 2].includes(await outside), "it never sees the intermediate 1");
    assert.equal(await count(db), 2);
  });

  test("changes are durable across connections to the same database; migrations are applied once", async (t) => {
    const place = await engine.place(t);
    const first = engine.open(place);
    await migrate(first);
    await first.run("INSERT INTO users (name, password_hash, created) VALUES ('u', 'h', 'now')");
    const second = engine.open(place);
    await migrate(second);
    assert.deepEqual(plain(await second.all("SELECT name FROM users")), [{ name: "u" }]);
    assert.deepEqual(plain(await second.all("SELECT version FROM schema_migrations ORDER BY version")), allVersions);
    await first.close();
    await second.close();
    const reopened = engine.open(place);
    t.after(() => reopened.close());
    assert.deepEqual(plain(await reopened.all("SELECT name FROM users")), [{ name: "u" }]);
  });

  // Several hosts on one database is a pool's: PostgreSQL only (an SQLite file belongs to one host, whose
  // synchronous connection would block the others' BEGIN in this one test process).
  const pooled = { skip: engine.name === "SQLite" ? "one host per SQLite database" : false };

  test("hosts migrating one database at the same time: it is migrated once, every host then finds it current", pooled, async (t) => {
    const place = await engine.place(t);
    const hosts = Array.from({ length: 4 }, () => engine.open(place));
    t.after(() => Promise.all(hosts.map((db) => db.close())));
    await Promise.all(hosts.map((db) => migrate(db)));
    assert.deepEqual(plain(await hosts[0]!.all("SELECT version FROM schema_migrations ORDER BY version")), allVersions);
  });

  test("transactions from separate connections (hosts) never interleave either", pooled, async (t) => {
    const place = await engine.place(t);
    const hosts = Array.from({ length: 3 }, () => engine.open(place));
    t.after(() => Promise.all(hosts.map((db) => db.close())));
    await hosts[0]!.run("CREATE TABLE c (name TEXT PRIMARY KEY, n BIGINT NOT NULL)");
    await hosts[0]!.run("INSERT INTO c (name, n) VALUES ('x', 0)");
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        hosts[i % hosts.length]!.transaction(async (tx) => {
          const n = Number((await tx.get<{ n: number }>("SELECT n FROM c WHERE name = 'x'"))!.n);
          await sleep(i % 2);
          await tx.run("UPDATE c SET n = ? WHERE name = 'x'", [n + 1]);
        }),
      ),
    );
    assert.equal(await count(hosts[1]!), 30);
  });

  test("BIGINT and DOUBLE PRECISION values come back as numbers", async (t) => {
    const db = await openDb(t);
    await db.run("CREATE TABLE v (a BIGINT, b DOUBLE PRECISION, c TEXT)");
    await db.run("INSERT INTO v (a, b, c) VALUES (?, ?, ?)", [2 ** 53 - 1, 0.25, "it's ? here"]);
    assert.deepEqual(plain(await db.all("SELECT a, b, c FROM v WHERE c = 'it''s ? here'")), [{ a: 2 ** 53 - 1, b: 0.25, c: "it's ? here" }]);
  });

  test("migration 5 gives the tasks already there their expiry, and every class its count", async (t) => {
    const db = await openDb(t);
    await migrate(db, { to: 4 });
    const made = Date.parse("2026-01-01T00:00:00Z");
    const rows: Array<[string, string, object]> = [
      ["OpaqueRef:a", "task", { status: "success", created: "20260101T00:00:00Z", finished: "20260101T00:00:10Z" }],
      ["OpaqueRef:b", "task", { status: "pending", created: "20260101T00:00:00Z", finished: "19700101T00:00:00Z" }],
      ["OpaqueRef:c", "task", { status: "failure", created: "20260101T00:00:00Z", finished: "19700101T00:00:00Z" }],
      ["OpaqueRef:d", "VM", { created: "20260101T00:00:00Z" }],
    ];
    for (const [ref, cls, record] of rows) {
      await db.run("INSERT INTO objects (ref, class, uuid, name_label, record) VALUES (?, ?, ?, '', ?)", [ref, cls, ref, JSON.stringify(record)]);
    }
    await migrate(db, { to: 5 });
    assert.deepEqual(plain(await db.all("SELECT ref, expires FROM objects ORDER BY ref")), [
      { ref: "OpaqueRef:a", expires: made + 10_000 + 24 * 3600_000 },
      { ref: "OpaqueRef:b", expires: made + 24 * 3600_000 },
      { ref: "OpaqueRef:c", expires: null },
      { ref: "OpaqueRef:d", expires: null },
    ]);
    const counts = await db.all<{ name: string; value: number }>("SELECT name, value FROM counters WHERE name LIKE 'objects:%'");
    assert.deepEqual(Object.fromEntries(counts.map((row) => [row.name, row.value])), { "objects:VM": 1, "objects:task": 3 });
  });

  test("migration 6 gives the objects already there their status (tasks) and name_description, and a count per task status", async (t) => {
    const db = await openDb(t);
    await migrate(db, { to: 5 });
    const rows: Array<[string, string, object]> = [
      ["OpaqueRef:a", "task", { status: "success", name_description: "Copy of volume “db”" }],
      ["OpaqueRef:b", "task", { status: "pending" }],
      ["OpaqueRef:c", "task", { status: "success" }],
      ["OpaqueRef:d", "VM", { power_state: "Halted", name_description: "web" }],
    ];
    for (const [ref, cls, record] of rows) {
      await db.run("INSERT INTO objects (ref, class, uuid, name_label, record) VALUES (?, ?, ?, '', ?)", [ref, cls, ref, JSON.stringify(record)]);
    }
    await migrate(db);
    assert.deepEqual(plain(await db.all("SELECT ref, status, name_description FROM objects ORDER BY ref")), [
      { ref: "OpaqueRef:a", status: "success", name_description: "Copy of volume “db”" },
      { ref: "OpaqueRef:b", status: "pending", name_description: "" },
      { ref: "OpaqueRef:c", status: "success", name_description: "" },
      { ref: "OpaqueRef:d", status: null, name_description: "web" },
    ]);
    const counts = await db.all<{ name: string; value: number }>("SELECT name, value FROM counters WHERE name LIKE 'objects:task:%'");
    assert.deepEqual(Object.fromEntries(counts.map((row) => [row.name, row.value])), { "objects:task:pending": 1, "objects:task:success": 2 });
  });

  test("a database made by a newer Hangar is refused", async (t) => {
    const db = await openDb(t);
    await migrate(db);
    await db.run("INSERT INTO schema_migrations (version, applied) VALUES (?, 'later')", [SCHEMA_VERSION + 1]);
    await assert.rejects(migrate(db), /newer than this Hangar's/);
  });
});
}

test("? placeholders become $n outside quoted strings and identifiers", () => {
  assert.equal(numberPlaceholders("SELECT * FROM t WHERE a = ? AND b = '?' AND \"c?\" = ? OR d = 'it''s ?' AND e = ?"), "SELECT * FROM t WHERE a = $1 AND b = '?' AND \"c?\" = $2 OR d = 'it''s ?' AND e = $3");
});
