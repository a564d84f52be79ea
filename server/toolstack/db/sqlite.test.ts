// The SQLite engine behind the query interface: a transaction is all or nothing, and no other statement or
// transaction runs between its statements, however its body awaits.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, test, type TestContext } from "node:test";
import type { Database } from "./database.ts";
import { migrate, SCHEMA_VERSION } from "./migrations.ts";
import { openSqlite } from "./sqlite.ts";

async function counterDb(t: TestContext, path = ":memory:"): Promise<Database> {
  const db = openSqlite(path);
  t.after(() => db.close());
  await db.run("CREATE TABLE IF NOT EXISTS c (name TEXT PRIMARY KEY, n BIGINT NOT NULL)");
  await db.run("INSERT INTO c (name, n) VALUES ('x', 0)");
  return db;
}

/** Rows as plain objects (node:sqlite gives them no prototype). */
const plain = (rows: object[]) => rows.map((row) => ({ ...row }));
const count = async (db: Database) => Number((await db.get<{ n: number }>("SELECT n FROM c WHERE name = 'x'"))!.n);

describe("SQLite database", () => {
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
      /UNIQUE constraint failed/,
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

  test("a statement issued while a transaction runs waits for it, and sees only committed data", async (t) => {
    const db = await counterDb(t);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const running = db.transaction(async (tx) => {
      await tx.run("UPDATE c SET n = 1");
      await held;
      await tx.run("UPDATE c SET n = 2");
    });
    const outside = count(db);
    const settled = await Promise.race([outside.then(() => "answered"), sleep(50).then(() => "waiting")]);
    assert.equal(settled, "waiting", "the read waits for the transaction");
    release();
    await running;
    assert.equal(await outside, 2, "it never sees the intermediate 1");
  });

  test("changes are durable across connections to the same file; migrations are applied once", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-sqlite-"));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, "nested", "toolstack.db");
    const first = openSqlite(path);
    await migrate(first);
    await first.run("INSERT INTO users (name, password_hash, created) VALUES ('u', 'h', 'now')");
    const second = openSqlite(path);
    await migrate(second);
    assert.deepEqual(plain(await second.all("SELECT name FROM users")), [{ name: "u" }]);
    assert.deepEqual(plain(await second.all("SELECT version FROM schema_migrations")), [{ version: SCHEMA_VERSION }]);
    await first.close();
    await second.close();
    const reopened = openSqlite(path);
    t.after(() => reopened.close());
    assert.deepEqual(plain(await reopened.all("SELECT name FROM users")), [{ name: "u" }]);
  });

  test("a database made by a newer Hangar is refused", async (t) => {
    const db = openSqlite(":memory:");
    t.after(() => db.close());
    await migrate(db);
    await db.run("INSERT INTO schema_migrations (version, applied) VALUES (?, 'later')", [SCHEMA_VERSION + 1]);
    await assert.rejects(migrate(db), /newer than this Hangar's/);
  });
});
