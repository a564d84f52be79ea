// SR lifecycle: an SR is a directory holding hangar-sr.db and the layers/, cbt/, stats/ folders.
import fs from "node:fs";
import path from "node:path";
import * as z from "zod/mini";
import { DB_FILE, srFiles } from "./layout.ts";
import { fsyncDirSync, isTemporaryFile } from "./durable.ts";
import { connectSr, createDatabase, disconnectSr, readSr, statement, transact, type SrConnection } from "./db.ts";
import { liveHandles } from "./handles.ts";
import { FileSrError, invalid } from "./errors.ts";
import { validateText } from "./volume-records.ts";

export type Health = "Healthy" | "Recovering" | "Unreachable" | "Unavailable";

export interface SrInfo {
  /** Absolute path of the SR directory. */
  path: string;
  uuid: string;
  name: string;
  description: string;
  attached: boolean;
}

export interface SrStat extends SrInfo {
  free_space: number;
  total_space: number;
  /** [constructor, reason], as the interface's `health` variant. */
  health: [Health, string];
  /** `xeno+shm:///<uid>` datasource URIs (files written by datasources.ts). */
  datasources: string[];
  clustered: false;
}

// Built when used: its uuid check costs milliseconds to construct, and every plugin call loads this module.
const createSrSchema = () => z.object({ uuid: z.uuid(), name: z.string(), description: z.string() });

/** Entries a fresh filesystem may hold that do not make a directory "foreign". */
const HARMLESS_ENTRIES = new Set(["lost+found"]);

/** What a create that crashed before linking the database leaves behind: ours to clear. */
function isCreateLeftover(srPath: string, name: string): boolean {
  if (name.startsWith(DB_FILE) && isTemporaryFile(name)) return true;
  const folders = Object.values(srFiles(srPath)).filter((file) => file !== srFiles(srPath).db);
  const full = path.join(srPath, name);
  return folders.includes(full) && fs.statSync(full).isDirectory() && fs.readdirSync(full).length === 0;
}

export function datasourceUid(uuid: string): string {
  return `hangar-sr-${uuid}`;
}

function info(conn: SrConnection): SrInfo {
  const sr = readSr(conn);
  return { path: conn.path, uuid: sr.uuid, name: sr.name, description: sr.description, attached: sr.attached === 1 };
}

/**
 * Creates an SR in directory `srPath` (created if missing; its parent must exist). Refuses a directory that
 * already holds an SR or anything else. The new SR is detached.
 */
export async function createSr(srPath: string, options: { uuid: string; name: string; description: string }): Promise<SrInfo> {
  const parsed = createSrSchema().safeParse(options);
  if (!parsed.success) throw invalid("bad_sr_options", `invalid SR options: ${z.prettifyError(parsed.error)}`);
  validateText(parsed.data.name, "name");
  validateText(parsed.data.description, "description");
  const absolute = path.resolve(srPath);
  try {
    fs.mkdirSync(absolute, { recursive: true });
  } catch (error) {
    throw invalid("sr_path_unusable", `cannot use ${absolute} for an SR: ${(error as Error).message}`);
  }
  const entries = fs.readdirSync(absolute);
  if (entries.includes(DB_FILE)) throw invalid("sr_exists", `${absolute} already holds a Hangar SR`);
  const foreign = entries.filter((name) => !HARMLESS_ENTRIES.has(name) && !isCreateLeftover(absolute, name));
  if (foreign.length > 0) {
    throw invalid("sr_path_not_empty", `${absolute} is not empty (holds ${foreign.slice(0, 3).join(", ")}); refusing to create an SR there`);
  }
  for (const name of entries) {
    if (!HARMLESS_ENTRIES.has(name)) fs.rmSync(path.join(absolute, name), { recursive: true, force: true });
  }
  const files = srFiles(absolute);
  for (const dir of [files.layers, files.cbt, files.stats]) fs.mkdirSync(dir);
  // Build the database under a temporary name and link it in place: the SR exists exactly when
  // hangar-sr.db does, and of two concurrent creators only one can win the link.
  const tmp = `${files.db}.tmp-${process.pid}`;
  createDatabase(tmp, parsed.data);
  try {
    fs.linkSync(tmp, files.db);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") throw invalid("sr_exists", `${absolute} already holds a Hangar SR`);
    throw error;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  fsyncDirSync(absolute);
  return info(connectSr(absolute));
}

/** The SRs at `srPath` or in its direct subdirectories, and whether `srPath` itself could take a new SR. */
export async function probeSrs(srPath: string): Promise<{ srs: SrStat[]; creatable: boolean }> {
  const absolute = path.resolve(srPath);
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(absolute, { withFileTypes: true });
  } catch {
    return { srs: [], creatable: fs.existsSync(path.dirname(absolute)) && !fs.existsSync(absolute) };
  }
  const candidates = [absolute, ...entries.filter((entry) => entry.isDirectory()).map((entry) => path.join(absolute, entry.name))];
  const srs: SrStat[] = [];
  for (const candidate of candidates) {
    if (!fs.existsSync(srFiles(candidate).db)) continue;
    try {
      srs.push(await statSr(candidate));
    } catch {
      // Unreadable metadata: not an SR we can offer.
    }
  }
  const creatable = entries.every((entry) => HARMLESS_ENTRIES.has(entry.name));
  return { srs, creatable };
}

/** Opens and validates the SR (metadata readable, integrity check passes, folders present). */
export async function openSr(srPath: string): Promise<SrInfo> {
  const conn = connectSr(srPath);
  const check = statement(conn, "PRAGMA quick_check").all() as Array<{ quick_check: string }>;
  if (check.length !== 1 || check[0]!.quick_check !== "ok") {
    throw new FileSrError("Invalid", "sr_metadata_corrupt", `SR metadata of ${conn.path} is corrupt: ${check.map((row) => row.quick_check).join("; ")}`, [conn.path]);
  }
  const files = srFiles(conn.path);
  for (const dir of [files.layers, files.cbt, files.stats]) {
    if (!fs.existsSync(dir)) throw invalid("sr_incomplete", `SR ${conn.path} lacks its ${path.basename(dir)} folder`);
  }
  return info(conn);
}

/** Marks the SR attached to this host (idempotent). */
export async function attachSr(srPath: string): Promise<SrInfo> {
  const conn = connectSr(srPath);
  transact(conn, () => statement(conn, "UPDATE sr SET attached = 1 WHERE id = 1").run());
  return info(conn);
}

/** Marks the SR detached (idempotent); the datasource daemon notices and exits. */
export async function detachSr(srPath: string): Promise<void> {
  const conn = connectSr(srPath);
  transact(conn, () => statement(conn, "UPDATE sr SET attached = 0 WHERE id = 1").run());
}

/**
 * Deletes every volume and the SR metadata (the directory itself stays). The SR must be attached and no
 * volume in use; a destroy interrupted by a crash is finished by calling this again.
 */
export async function destroySr(srPath: string): Promise<void> {
  const conn = connectSr(srPath, { destroying: true });
  transact(conn, () => {
    const sr = readSr(conn);
    if (!sr.destroying) {
      if (!sr.attached) throw new FileSrError("Sr_not_attached", "sr_not_attached", `SR ${conn.path} is not attached`, [conn.path]);
      const busy = liveHandles(conn, "purpose NOT IN ('gc', 'daemon')")[0];
      if (busy) throw invalid("sr_in_use", `SR ${conn.path} is in use (process ${busy.pid} has a volume open)`);
      const active = statement(conn, "SELECT volumes.key FROM activations JOIN volumes ON volumes.id = activations.volume LIMIT 1").get() as
        | { key: string }
        | undefined;
      if (active) throw invalid("sr_in_use", `SR ${conn.path} is in use (volume ${active.key} is activated)`);
    }
    statement(conn, "UPDATE sr SET destroying = 1, attached = 0 WHERE id = 1").run();
  });
  const files = srFiles(conn.path);
  for (const dir of [files.layers, files.cbt, files.stats]) fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(files.reserve, { force: true });
  disconnectSr(conn.path);
  // The metadata goes last, so a crash before this point leaves an SR that says "being destroyed".
  fs.rmSync(files.db, { force: true });
  for (const suffix of ["-wal", "-shm"]) fs.rmSync(files.db + suffix, { force: true });
  fsyncDirSync(conn.path);
}

function health(conn: SrConnection): [Health, string] {
  const files = srFiles(conn.path);
  for (const dir of [files.layers, files.cbt]) {
    try {
      fs.accessSync(dir, fs.constants.W_OK);
    } catch (error) {
      return ["Unreachable", `${dir} is not writable (${(error as NodeJS.ErrnoException).code})`];
    }
  }
  const merge = statement(conn, "SELECT parent, child FROM merges LIMIT 1").get() as { parent: number; child: number } | undefined;
  if (merge) return ["Recovering", `garbage collection is merging layer ${merge.child} into layer ${merge.parent}`];
  return ["Healthy", ""];
}

/** Summary of the SR: identity, space of its filesystem, health. */
export async function statSr(srPath: string): Promise<SrStat> {
  let conn: SrConnection;
  try {
    conn = connectSr(srPath);
  } catch (error) {
    if (error instanceof FileSrError && error.code === "sr_destroying") {
      const absolute = path.resolve(srPath);
      const sr = readSr(connectSr(absolute, { destroying: true }));
      return {
        path: absolute,
        uuid: sr.uuid,
        name: sr.name,
        description: sr.description,
        attached: false,
        free_space: 0,
        total_space: 0,
        health: ["Unavailable", "a destroy of this SR was interrupted; destroy it again"],
        datasources: [],
        clustered: false,
      };
    }
    throw error;
  }
  let space = { free: 0, total: 0 };
  let state = health(conn);
  try {
    const stats = fs.statfsSync(conn.path);
    space = { free: stats.bavail * stats.bsize, total: stats.blocks * stats.bsize };
  } catch (error) {
    state = ["Unavailable", `cannot read filesystem space: ${(error as Error).message}`];
  }
  const base = info(conn);
  return {
    ...base,
    free_space: space.free,
    total_space: space.total,
    health: state,
    datasources: [`xeno+shm:///${datasourceUid(base.uuid)}`],
    clustered: false,
  };
}

export async function setSrName(srPath: string, name: string): Promise<void> {
  const conn = connectSr(srPath);
  const value = validateText(name, "name");
  transact(conn, () => statement(conn, "UPDATE sr SET name = ? WHERE id = 1").run(value));
}

export async function setSrDescription(srPath: string, description: string): Promise<void> {
  const conn = connectSr(srPath);
  const value = validateText(description, "description");
  transact(conn, () => statement(conn, "UPDATE sr SET description = ? WHERE id = 1").run(value));
}
