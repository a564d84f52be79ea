// The pool's engine: PostgreSQL through node-postgres (`pg`), a pool of connections. The shared SQL's `?`
// placeholders become `$1…`; BIGINT columns come back as numbers, as SQLite gives them. Transactions keep the
// embedded engine's promise that they never interleave, across every host sharing the database: each takes
// one transaction-scoped advisory lock first, so read-modify-write bodies need no locking of their own.
import pg from "pg";
import type { Database, Queryable, SqlValue } from "./database.ts";

/** The advisory lock every transaction holds ("HANG"). */
const TRANSACTION_LOCK = 0x48414e47;
const INT8_OID = 20;

/** `?` placeholders to `$n`, leaving quoted strings and identifiers alone. */
export function numberPlaceholders(sql: string): string {
  let out = "";
  let index = 0;
  let quote: string | undefined;
  for (const char of sql) {
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
    } else if (char === "'" || char === '"') quote = char;
    else if (char === "?") {
      out += `$${++index}`;
      continue;
    }
    out += char;
  }
  return out;
}

function int8(value: string): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) throw new Error(`a BIGINT out of JavaScript's safe range: ${value}`);
  return number;
}

const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => (oid === INT8_OID ? int8 : pg.types.getTypeParser(oid, format))) as typeof pg.types.getTypeParser,
};

/** `sql` with `$n` placeholders, each statement translated once per database. */
type Translate = (sql: string) => string;

function queryable(client: pg.Pool | pg.PoolClient, text: Translate): Queryable {
  return {
    all: async <T extends object>(sql: string, params: readonly SqlValue[] = []) => (await client.query(text(sql), [...params])).rows as T[],
    get: async <T extends object>(sql: string, params: readonly SqlValue[] = []) => (await client.query(text(sql), [...params])).rows[0] as T | undefined,
    run: async (sql: string, params: readonly SqlValue[] = []) => (await client.query(text(sql), [...params])).rowCount ?? 0,
  };
}

export interface PostgresOptions {
  /** Connections kept open at most (default 10). */
  max?: number;
}

/** Opens `url` (`postgres://user:password@host:port/database`); connections are made as statements need them. */
export function openPostgres(url: string, options: PostgresOptions = {}): Database {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10, types });
  // An idle connection the server drops (a restart) is replaced on next use; without a listener it would crash the process.
  pool.on("error", () => undefined);
  const texts = new Map<string, string>();
  const text: Translate = (sql) => {
    let numbered = texts.get(sql);
    if (numbered === undefined) texts.set(sql, (numbered = numberPlaceholders(sql)));
    return numbered;
  };
  const direct = queryable(pool, text);
  const committed = new Set<() => void>();
  return {
    engine: "postgres",
    ...direct,
    onCommit: (listener) => void committed.add(listener),
    transaction: async (body) => {
      const client = await pool.connect();
      // A connection whose ROLLBACK failed is in an unknown state: it is closed, not given back to the pool.
      let broken = false;
      try {
        await client.query("BEGIN");
        try {
          await client.query("SELECT pg_advisory_xact_lock($1)", [TRANSACTION_LOCK]);
          const result = await body(queryable(client, text));
          await client.query("COMMIT");
          for (const listener of committed) listener();
          return result;
        } catch (error) {
          await client.query("ROLLBACK").catch(() => (broken = true));
          throw error;
        }
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}
