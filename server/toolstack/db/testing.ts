// A throwaway PostgreSQL cluster for tests and benches: Debian's server binaries, initdb into a temp dir, one
// postgres on a free loopback port (durability off for tests: their data is thrown away), a fresh database
// per caller.
// PostgreSQL refuses to run as root: as root the cluster runs as the `postgres` user the package made.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import type { Database, Queryable, SqlValue } from "./database.ts";
import { openPostgres } from "./postgres.ts";
import { openSqlite } from "./sqlite.ts";
import { freePort } from "../../free-port.ts";

const DEBIAN_ROOT = "/usr/lib/postgresql";

/** The newest installed server's bin dir, or an error saying what to install. */
function serverBin(): string {
  const versions = existsSync(DEBIAN_ROOT) ? readdirSync(DEBIAN_ROOT).filter((v) => existsSync(join(DEBIAN_ROOT, v, "bin", "initdb"))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`no PostgreSQL server under ${DEBIAN_ROOT}: install Debian's postgresql package (npm test does, as root)`);
  return join(DEBIAN_ROOT, newest, "bin");
}

/** As root, the postgres user's uid and gid (from /etc/passwd); otherwise the cluster runs as the caller. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync("/etc/passwd", "utf8").split("\n").find((entry) => entry.startsWith("postgres:"));
  if (line === undefined) throw new Error("running as root, and there is no postgres user to run PostgreSQL as");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

export interface TestPostgres {
  /** A new, empty database of the cluster: its URL. */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
}

/** `durable`: fsync and synchronous commit on, as in production (benchmarks); off by default (tests). */
export async function startTestPostgres(options: { durable?: boolean } = {}): Promise<TestPostgres> {
  const bin = serverBin();
  const user = runAs();
  const dir = mkdtempSync(join(tmpdir(), "hangar-pg-"));
  if (user !== undefined) chownSync(dir, user.uid, user.gid);
  const data = join(dir, "data");
  const init = spawnSync(join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"], { ...user, encoding: "utf8" });
  if (init.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${init.stderr || init.error?.message}`);
  }
  const port = await freePort();
  const fast = options.durable === true ? [] : ["fsync=off", "synchronous_commit=off", "full_page_writes=off"];
  const settings = [...fast, "max_connections=200"].flatMap((setting) => ["-c", setting]);
  const server: ChildProcess = spawn(join(bin, "postgres"), ["-D", data, "-h", "127.0.0.1", "-p", String(port), "-k", dir, ...settings], { ...user, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  server.stderr!.setEncoding("utf8").on("data", (text: string) => (log = (log + text).slice(-4000)));
  const exited = new Promise<void>((resolve) => server.once("exit", () => resolve()));
  const base = `postgres://postgres@127.0.0.1:${port}`;
  const admin = new pg.Pool({ connectionString: `${base}/postgres`, max: 2 });
  admin.on("error", () => undefined);
  const stop = async () => {
    await admin.end().catch(() => undefined);
    if (server.exitCode === null && server.signalCode === null) {
      server.kill("SIGINT"); // fast shutdown
      const timer = setTimeout(() => server.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (server.exitCode !== null) {
      await stop();
      throw new Error(`postgres exited: ${log.trim()}`);
    }
    if (await admin.query("SELECT 1").then(() => true, () => false)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`postgres did not accept connections within 30 s: ${log.trim()}`);
    }
    await sleep(100);
  }
  let databases = 0;
  return {
    createDatabase: async () => {
      const name = `hangar_test_${++databases}`;
      await admin.query(`CREATE DATABASE ${name}`);
      return `${base}/${name}`;
    },
    stop,
  };
}

/** An engine under test: `place()` names a new, empty database; `open(place)` connects to it (again). */
export interface TestEngine {
  name: "SQLite" | "PostgreSQL";
  place(t: TestContext): Promise<string>;
  open(place: string): Database;
}

/**
 * Both engines, for a test file to run its tests on each: call it at the file's top level. PostgreSQL's
 * cluster starts before the file's tests and stops after them.
 */
export function bothEngines(): TestEngine[] {
  let cluster: TestPostgres | undefined;
  before(async () => {
    cluster = await startTestPostgres();
  });
  after(() => cluster?.stop());
  return [
    {
      name: "SQLite",
      place: async (t) => {
        const dir = await mkdtemp(join(tmpdir(), "hangar-sqlite-"));
        t.after(() => rm(dir, { recursive: true, force: true }));
        return join(dir, "nested", "toolstack.db");
      },
      open: openSqlite,
    },
    { name: "PostgreSQL", place: () => cluster!.createDatabase(), open: (url) => openPostgres(url) },
  ];
}

/** A database that counts the stored records (rows with a `record` column) its statements read, and logs the statements. */
export interface CountingDatabase extends Database {
  /** Since the last reset(). */
  readonly seen: { records: number; statements: string[] };
  reset(): void;
}

export function countingRecords(db: Database): CountingDatabase {
  const seen = { records: 0, statements: [] as string[] };
  const counted = (queryable: Queryable): Queryable => ({
    all: async <T extends object>(sql: string, params?: readonly SqlValue[]) => {
      seen.statements.push(sql);
      const rows = await queryable.all<T>(sql, params);
      seen.records += rows.filter((row) => "record" in row).length;
      return rows;
    },
    get: async <T extends object>(sql: string, params?: readonly SqlValue[]) => {
      seen.statements.push(sql);
      const row = await queryable.get<T>(sql, params);
      if (row !== undefined && "record" in row) seen.records++;
      return row;
    },
    run: (sql, params) => {
      seen.statements.push(sql);
      return queryable.run(sql, params);
    },
  });
  return {
    ...counted(db),
    engine: db.engine,
    transaction: (body) => db.transaction((tx) => body(counted(tx))),
    onCommit: (listener) => db.onCommit(listener),
    close: () => db.close(),
    seen,
    reset: () => {
      seen.records = 0;
      seen.statements = [];
    },
  };
}
