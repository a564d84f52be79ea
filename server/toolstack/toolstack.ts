// One toolstack: its database, objects, events, sessions, tasks, plugin access and call table, opened on a
// data dir. First start makes the pool and this host; every start recovers tasks a previous run left.
import { hostname } from "node:os";
import { join } from "node:path";
import { dataDir, databaseUrl, hostUuid } from "../config.ts";
import { eventCalls } from "./calls/event.ts";
import { sessionCalls } from "./calls/session.ts";
import { systemCalls } from "./calls/system.ts";
import { taskCalls } from "./calls/task.ts";
import type { Database } from "./db/database.ts";
import { migrate } from "./db/migrations.ts";
import { openSqlite } from "./db/sqlite.ts";
import { openPostgres } from "./db/postgres.ts";
import { EventLog } from "./events.ts";
import type { Route } from "./http.ts";
import { ObjectStore } from "./objects.ts";
import { Sessions } from "./sessions.ts";
import { Storage } from "./storage.ts";
import { Tasks } from "./tasks.ts";
import { MethodTable, type MethodDef } from "./xenapi/methods.ts";
import { NULL_REF, type XenRecord } from "./xenapi/values.ts";

export const API_VERSION = { major: 2, minor: 21 } as const;
const HOUSEKEEPING_MS = 60_000;

export interface ToolstackOptions {
  dataDir?: string;
  /** Default: a SQLite file in the data dir. */
  database?: Database;
  pluginRoot?: string;
  /** Time limit of one plugin call (default: the transports' own, 60 s). */
  pluginTimeoutMs?: number;
  rootPassword?: string;
  sessionTimeoutMs?: number;
  /** Called once with a generated root password (first start without HANGAR_ROOT_PASSWORD). */
  onGeneratedPassword?: (password: string) => void;
}

/** Work done at start after the pool and host exist (e.g. the default SR); added by feature modules. */
export type StartupStep = (ts: Toolstack) => Promise<void>;

export interface Toolstack {
  readonly dataDir: string;
  readonly db: Database;
  readonly events: EventLog;
  readonly objects: ObjectStore;
  readonly sessions: Sessions;
  readonly tasks: Tasks;
  readonly storage: Storage;
  readonly methods: MethodTable;
  readonly host: { ref: string; uuid: string };
  readonly poolRef: string;
  close(): Promise<void>;
}

export interface Feature {
  calls: MethodDef[];
  /** HTTP resources beside the API, by path without a trailing slash (e.g. "/import"). */
  routes?: Record<string, Route>;
  /** Registers event classes, task recoveries; runs after the pool and host exist. */
  start?: StartupStep;
}

const CORE: Feature[] = [{ calls: [...sessionCalls, ...taskCalls, ...eventCalls, ...systemCalls] }];

/** HANGAR_DATABASE_URL's PostgreSQL (a pool's shared database) when set, else SQLite in the data dir. */
function openDatabase(dir: string): Database {
  const url = databaseUrl();
  if (url === undefined) return openSqlite(join(dir, "toolstack.db"));
  return openPostgres(url);
}

export async function openToolstack(options: ToolstackOptions = {}, features: Feature[] = []): Promise<Toolstack> {
  const dir = options.dataDir ?? dataDir();
  const db = options.database ?? openDatabase(dir);
  await migrate(db);
  const events = new EventLog(db);
  const objects = new ObjectStore(db, events);
  const { poolRef, host } = await ensurePoolAndHost(db, objects, hostUuid(dir));
  const sessions = new Sessions(db, { timeoutMs: options.sessionTimeoutMs ?? 24 * 60 * 60 * 1000 });
  const { generated } = await sessions.ensureRoot(options.rootPassword);
  if (generated !== undefined) options.onGeneratedPassword?.(generated);
  const methods = new MethodTable();
  for (const feature of [...CORE, ...features]) methods.add(...feature.calls);
  for (const cls of ["pool", "host", "task"]) events.registerClass(cls, () => objects.all(cls), () => objects.count(cls));

  const timers: NodeJS.Timeout[] = [];
  const ts: Toolstack = {
    dataDir: dir,
    db,
    events,
    objects,
    sessions,
    tasks: new Tasks(objects, host.ref),
    storage: new Storage(options.pluginRoot, { timeoutMs: options.pluginTimeoutMs }),
    methods,
    host,
    poolRef,
    close: async () => {
      for (const timer of timers) clearInterval(timer);
      await db.close();
    },
  };
  for (const feature of features) await feature.start?.(ts);
  await ts.tasks.recover();
  const housekeeping = async () => {
    await ts.tasks.collect();
    await ts.sessions.expire();
  };
  await housekeeping();
  timers.push(setInterval(() => void housekeeping().catch((error: unknown) => console.error("housekeeping:", error)), HOUSEKEEPING_MS).unref());
  return ts;
}

/** The pool and this host's record, made on first start. */
async function ensurePoolAndHost(db: Database, objects: ObjectStore, uuid: string): Promise<{ poolRef: string; host: { ref: string; uuid: string } }> {
  return db.transaction(async (tx) => {
    let host = (await objects.all("host", tx)).find((h) => h.record.uuid === uuid);
    if (host === undefined) host = await objects.create("host", hostRecord(uuid), { db: tx });
    let pool = (await objects.all("pool", tx))[0];
    if (pool === undefined) pool = await objects.create("pool", poolRecord(host.ref), { db: tx });
    return { poolRef: pool.ref, host: { ref: host.ref, uuid } };
  });
}

function hostRecord(uuid: string): XenRecord {
  const name = hostname();
  return {
    uuid,
    name_label: name,
    name_description: "",
    hostname: name,
    address: "127.0.0.1",
    enabled: true,
    API_version_major: API_VERSION.major,
    API_version_minor: API_VERSION.minor,
    API_version_vendor: "Hangar",
    software_version: { product_brand: "Hangar", product_version: "0.1.0", xapi: `${API_VERSION.major}.${API_VERSION.minor}` },
    other_config: {},
    resident_VMs: [],
    PBDs: [],
    PIFs: [],
    allowed_operations: [],
    current_operations: {},
  };
}

function poolRecord(master: string): XenRecord {
  return {
    uuid: crypto.randomUUID(),
    name_label: "",
    name_description: "",
    master,
    default_SR: NULL_REF,
    suspend_image_SR: NULL_REF,
    crash_dump_SR: NULL_REF,
    other_config: {},
    allowed_operations: [],
    current_operations: {},
    tags: [],
  };
}
