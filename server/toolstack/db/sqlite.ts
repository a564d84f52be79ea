// The embedded engine: one node:sqlite connection (WAL, synchronous=NORMAL). node:sqlite is synchronous, so
// the async interface only has to keep a transaction's statements together: a lock queues every other
// statement and transaction until the running transaction ends.
//
// synchronous=NORMAL: in WAL mode a commit survives the death of the process (kill -9 included) and the database
// never corrupts; a power cut may lose the last commits (xapi's own database is flushed every few seconds). FULL
// fsynced every commit on the event loop: 13 s of the toolstack's 105 in the load bench, with everyone's reads
// queued behind each fsync.
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { Database, Queryable, SqlValue } from "./database.ts";

export function openSqlite(path: string): Database {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("PRAGMA busy_timeout = 10000");
  db.exec("PRAGMA foreign_keys = ON");
  const statements = new Map<string, StatementSync>();
  const prepare = (sql: string) => {
    let statement = statements.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      statements.set(sql, statement);
    }
    return statement;
  };
  const args = (params: readonly SqlValue[]) => params as SQLInputValue[];
  const direct: Queryable = {
    all: async <T extends object>(sql: string, params: readonly SqlValue[] = []) => prepare(sql).all(...args(params)) as T[],
    get: async <T extends object>(sql: string, params: readonly SqlValue[] = []) => prepare(sql).get(...args(params)) as T | undefined,
    run: async (sql: string, params: readonly SqlValue[] = []) => Number(prepare(sql).run(...args(params)).changes),
  };

  let tail: Promise<unknown> = Promise.resolve();
  /** Runs `work` after everything queued before it. */
  const exclusive = <T>(work: () => Promise<T>): Promise<T> => {
    const result = tail.then(work, work);
    tail = result.catch(() => undefined);
    return result;
  };

  const committed = new Set<() => void>();
  return {
    engine: "sqlite",
    onCommit: (listener) => void committed.add(listener),
    all: (sql, params) => exclusive(() => direct.all(sql, params)),
    get: (sql, params) => exclusive(() => direct.get(sql, params)),
    run: (sql, params) => exclusive(() => direct.run(sql, params)),
    transaction: (body) =>
      exclusive(async () => {
        db.exec("BEGIN IMMEDIATE");
        try {
          const result = await body(direct);
          db.exec("COMMIT");
          for (const listener of committed) listener();
          return result;
        } catch (error) {
          db.exec("ROLLBACK");
          throw error;
        }
      }),
    close: () => exclusive(async () => db.close()),
  };
}
