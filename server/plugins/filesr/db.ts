// The SR's metadata database (SQLite on the SR itself): schema, connections, transactions.
// Every change is one `BEGIN IMMEDIATE` transaction, run synchronously (never across an await), so two
// processes on one SR serialise on SQLite's write lock and a crash leaves the last committed state.
import { DatabaseSync, type StatementSync } from "node:sqlite";
import fs from "node:fs";
import path from "node:path";
import { CLUSTER_SIZE, FORMAT_VERSION, srFiles } from "./layout.ts";
import { FileSrError, srMissing } from "./errors.ts";

/**
 * How long a transaction waits for another process's write lock. Under load many plugin calls write the same
 * SR at once, and SQLite's waiters poll rather than queue: at 15 s, 80 concurrent create/destroy callers saw 7%
 * of their calls fail "database is locked" (waits up to 40 s). Below the toolstack's 60 s call time-out, so a
 * call that cannot get the lock still fails in words before it is killed.
 */
const BUSY_TIMEOUT_MS = 50_000;

const SCHEMA = `
CREATE TABLE sr (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  format INTEGER NOT NULL,
  uuid TEXT NOT NULL,
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  cluster_size INTEGER NOT NULL,
  attached INTEGER NOT NULL DEFAULT 0,
  destroying INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);
CREATE TABLE layers (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  token TEXT NOT NULL UNIQUE,
  parent INTEGER REFERENCES layers(id),
  size INTEGER NOT NULL,
  complete INTEGER NOT NULL DEFAULT 0,
  allocated INTEGER NOT NULL DEFAULT 0,
  stray INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX layers_parent ON layers(parent);
CREATE TABLE cbt_logs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  token TEXT NOT NULL UNIQUE,
  parent INTEGER REFERENCES cbt_logs(id),
  size INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('clean', 'dirty', 'lost')),
  writer INTEGER
);
CREATE TABLE volumes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  key TEXT NOT NULL UNIQUE,
  uuid TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  description TEXT NOT NULL,
  read_write INTEGER NOT NULL,
  sharable INTEGER NOT NULL,
  size INTEGER NOT NULL,
  top_layer INTEGER REFERENCES layers(id),
  cbt_enabled INTEGER NOT NULL DEFAULT 0,
  cbt_log INTEGER REFERENCES cbt_logs(id),
  lineage TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX volumes_top_layer ON volumes(top_layer);
CREATE INDEX volumes_lineage ON volumes(lineage);
CREATE TABLE volume_keys (
  volume INTEGER NOT NULL REFERENCES volumes(id) ON DELETE CASCADE,
  k TEXT NOT NULL,
  v TEXT NOT NULL,
  PRIMARY KEY (volume, k)
);
CREATE TABLE activations (
  volume INTEGER NOT NULL REFERENCES volumes(id) ON DELETE CASCADE,
  host TEXT NOT NULL,
  domain TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('rw', 'ro')),
  PRIMARY KEY (volume, host, domain)
);
CREATE TABLE handles (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  purpose TEXT NOT NULL CHECK (purpose IN ('read', 'write', 'overlay', 'copy', 'materialize', 'gc', 'daemon')),
  volume INTEGER REFERENCES volumes(id),
  write_layer INTEGER REFERENCES layers(id),
  host TEXT NOT NULL,
  machine TEXT NOT NULL,
  boot_id TEXT NOT NULL,
  pid INTEGER NOT NULL,
  pid_start TEXT NOT NULL,
  pause TEXT CHECK (pause IN ('requested', 'paused')),
  pauser TEXT,
  opened_at TEXT NOT NULL
);
CREATE INDEX handles_volume ON handles(volume);
CREATE INDEX handles_write_layer ON handles(write_layer);
CREATE TABLE merges (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  parent INTEGER NOT NULL REFERENCES layers(id),
  child INTEGER NOT NULL REFERENCES layers(id),
  owner INTEGER NOT NULL,
  cancelled INTEGER NOT NULL DEFAULT 0,
  started_at TEXT NOT NULL
);
CREATE TABLE io_totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  read_bytes INTEGER NOT NULL, write_bytes INTEGER NOT NULL,
  read_ops INTEGER NOT NULL, write_ops INTEGER NOT NULL,
  read_latency_us INTEGER NOT NULL, write_latency_us INTEGER NOT NULL
);
INSERT INTO io_totals VALUES (1, 0, 0, 0, 0, 0, 0);
`;

export interface SrRow {
  format: number;
  uuid: string;
  name: string;
  description: string;
  cluster_size: number;
  attached: number;
  destroying: number;
}

export interface LayerRow {
  id: number;
  token: string;
  parent: number | null;
  size: number;
  /** 1: every cluster is DATA, the data file alone is the volume (materialized for a raw-file datapath). */
  complete: number;
  allocated: number;
  /** 1: the data file may hold bytes outside DATA clusters (being written, crashed, trimmed, merged into). */
  stray: number;
}

export interface VolumeRow {
  id: number;
  key: string;
  uuid: string;
  name: string;
  description: string;
  read_write: number;
  sharable: number;
  size: number;
  top_layer: number | null;
  cbt_enabled: number;
  cbt_log: number | null;
  lineage: string;
  created_at: string;
}

export interface CbtLogRow {
  id: number;
  token: string;
  parent: number | null;
  size: number;
  state: "clean" | "dirty" | "lost";
  writer: number | null;
}

/**
 * Space held back on the SR's filesystem for the metadata: when volume data has filled it, SQLite cannot even
 * delete a row (the WAL needs room), so deactivating and destroying the volumes that would free the space
 * fail. A transaction that finds the disk full gives the reserve up and runs again; the reserve comes back
 * when there is room.
 */
const RESERVE_BYTES = 4 * 1024 * 1024;

/** Makes the reserve if it is missing and there is room (best effort). */
function keepReserve(srPath: string): void {
  const file = srFiles(srPath).reserve;
  if (fs.existsSync(file)) return;
  const partial = `${file}.${process.pid}`;
  try {
    fs.writeFileSync(partial, Buffer.alloc(RESERVE_BYTES));
    fs.renameSync(partial, file);
  } catch {
    fs.rmSync(partial, { force: true });
  }
}

function isDiskFull(error: unknown): boolean {
  return (error as { errcode?: number }).errcode === 13 || /database or disk is full/i.test((error as Error).message ?? "");
}

/** Gives the reserve up; answers whether there was one. */
function releaseReserve(srPath: string): boolean {
  try {
    fs.unlinkSync(srFiles(srPath).reserve);
    return true;
  } catch {
    return false;
  }
}

export interface SrConnection {
  readonly path: string;
  readonly db: DatabaseSync;
  readonly ino: number;
  depth: number;
  readonly statements: Map<string, StatementSync>;
}

const connections = new Map<string, SrConnection>();

function openDatabase(file: string): DatabaseSync {
  // mode=rw: never create a database file as a side effect of looking for one.
  const uri = file.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16)}`);
  const db = new DatabaseSync(`file:${uri}?mode=rw`, { timeout: BUSY_TIMEOUT_MS });
  db.exec("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;");
  return db;
}

/** Creates the metadata database of a new SR at `file` (which must not exist). */
export function createDatabase(file: string, sr: { uuid: string; name: string; description: string }): void {
  const db = new DatabaseSync(file);
  try {
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;");
    db.exec(`BEGIN; ${SCHEMA} COMMIT;`);
    db.prepare(
      `INSERT INTO sr (id, format, uuid, name, description, cluster_size, created_at) VALUES (1, ?, ?, ?, ?, ?, ?)`,
    ).run(FORMAT_VERSION, sr.uuid, sr.name, sr.description, CLUSTER_SIZE, new Date().toISOString());
  } finally {
    db.close();
  }
}

function statOrNull(file: string): fs.Stats | null {
  try {
    return fs.statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
}

function corrupt(srPath: string, reason: string): FileSrError {
  return new FileSrError("Invalid", "sr_metadata_corrupt", `SR metadata of ${srPath} is unreadable: ${reason}`, [
    srPath,
  ]);
}

/** Checks the directory and the metadata file, distinguishing a missing directory from missing metadata. */
function locate(srPath: string): fs.Stats {
  const dir = statOrNull(srPath);
  if (!dir) throw srMissing("sr_directory_missing", srPath, `SR directory ${srPath} does not exist`);
  if (!dir.isDirectory()) throw srMissing("sr_directory_missing", srPath, `${srPath} is not a directory`);
  const meta = statOrNull(srFiles(srPath).db);
  if (!meta) throw srMissing("sr_metadata_missing", srPath, `${srPath} holds no Hangar SR (no ${path.basename(srFiles(srPath).db)})`);
  return meta;
}

function open(srPath: string, ino: number): SrConnection {
  let db: DatabaseSync | undefined;
  try {
    db = openDatabase(srFiles(srPath).db);
    const row = db.prepare("SELECT format, cluster_size FROM sr WHERE id = 1").get() as
      | { format: number; cluster_size: number }
      | undefined;
    if (!row) throw corrupt(srPath, "no SR record");
    if (row.format !== FORMAT_VERSION) throw corrupt(srPath, `unsupported format version ${row.format}`);
    if (row.cluster_size !== CLUSTER_SIZE) throw corrupt(srPath, `unsupported cluster size ${row.cluster_size}`);
  } catch (error) {
    db?.close();
    if (error instanceof FileSrError) throw error;
    throw corrupt(srPath, (error as Error).message);
  }
  keepReserve(srPath);
  return { path: srPath, db, ino, depth: 0, statements: new Map() };
}

/**
 * A connection to the SR at `srPath` (absolute), cached per process and reopened when the metadata file
 * was replaced. `attached` requires the SR to be attached; a half-destroyed SR counts as missing.
 */
export function connectSr(srPath: string, options: { attached?: boolean; destroying?: boolean } = {}): SrConnection {
  const absolute = path.resolve(srPath);
  const meta = locate(absolute);
  let conn = connections.get(absolute);
  if (conn && conn.ino !== meta.ino) {
    disconnectSr(absolute);
    conn = undefined;
  }
  if (!conn) {
    conn = open(absolute, meta.ino);
    connections.set(absolute, conn);
  }
  const sr = readSr(conn);
  if (sr.destroying && !options.destroying) {
    throw srMissing("sr_destroying", absolute, `SR ${absolute} is being destroyed`);
  }
  if (options.attached && !sr.attached) {
    throw new FileSrError("Sr_not_attached", "sr_not_attached", `SR ${absolute} is not attached`, [absolute]);
  }
  return conn;
}

export function disconnectSr(srPath: string): void {
  const absolute = path.resolve(srPath);
  const conn = connections.get(absolute);
  if (!conn) return;
  connections.delete(absolute);
  conn.statements.clear();
  conn.db.close();
}

export function statement(conn: SrConnection, sql: string): StatementSync {
  let prepared = conn.statements.get(sql);
  if (!prepared) {
    prepared = conn.db.prepare(sql);
    conn.statements.set(sql, prepared);
  }
  return prepared;
}

export function readSr(conn: SrConnection): SrRow {
  return statement(conn, "SELECT * FROM sr WHERE id = 1").get() as unknown as SrRow;
}

/**
 * Runs `change` in one write transaction (joined when already inside one). `change` must be synchronous. A
 * transaction that finds the disk full runs once more after giving up the space reserve.
 */
export function transact<T>(conn: SrConnection, change: () => T): T {
  if (conn.depth > 0) return change();
  try {
    return transactOnce(conn, change);
  } catch (error) {
    if (!isDiskFull(error) || !releaseReserve(conn.path)) throw error;
    return transactOnce(conn, change);
  }
}

function transactOnce<T>(conn: SrConnection, change: () => T): T {
  conn.db.exec("BEGIN IMMEDIATE");
  conn.depth++;
  try {
    const result = change();
    if (result instanceof Promise) throw new Error("transaction bodies must be synchronous");
    conn.db.exec("COMMIT");
    return result;
  } catch (error) {
    if (conn.db.isTransaction) conn.db.exec("ROLLBACK");
    throw error;
  } finally {
    conn.depth--;
  }
}

export function nowIso(): string {
  return new Date().toISOString();
}
