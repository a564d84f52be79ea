// One toolstack: its database, objects, events, sessions, tasks, plugin access and call table, opened on a
// data dir. First start makes the pool and this host; every start recovers tasks a previous run left.
import { join } from "node:path";
import { auditRetentionMs, dataDir, databaseUrl, heartbeatMs, hostUuid, poolRole } from "../config.ts";
import { LoginLimiter, TOOLSTACK_LOGIN_LIMITS } from "../login-limiter.ts";
import { AuditLog } from "./rbac/audit.ts";
import { eventCalls } from "./calls/event.ts";
import { sessionCalls } from "./calls/session.ts";
import { systemCalls } from "./calls/system.ts";
import { taskCalls } from "./calls/task.ts";
import type { Database } from "./db/database.ts";
import { migrate } from "./db/migrations.ts";
import { openSqlite } from "./db/sqlite.ts";
import { openPostgres } from "./db/postgres.ts";
import { EventLog } from "./events.ts";
import { API_VERSION, joinPool, PoolMembership } from "./hosts.ts";
import type { Route } from "./http.ts";
import { ObjectStore, registerStoredClasses } from "./objects.ts";
import { Sessions } from "./sessions.ts";
import { Storage } from "./storage.ts";
import { Tasks } from "./tasks.ts";
import { MethodTable, type MethodDef } from "./methods.ts";

export { API_VERSION };
const HOUSEKEEPING_MS = 60_000;

export interface ToolstackOptions {
  dataDir?: string;
  /** Default: a SQLite file in the data dir. */
  database?: Database;
  pluginRoot?: string;
  /** Time limit of one plugin call (default: the transports' own, 60 s). */
  pluginTimeoutMs?: number;
  rootPassword?: string;
  /** The address this host is reached at (default HANGAR_HOST_ADDRESS, else 127.0.0.1). */
  hostAddress?: string;
  /** Default HANGAR_POOL_ROLE, else master. */
  poolRole?: "master" | "member";
  /** Default HANGAR_HEARTBEAT_MS, else 2 s. */
  heartbeatMs?: number;
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
  /** The audit trail (rbac/audit.ts). */
  readonly audit: AuditLog;
  /** Failed logins, per user and per client address (login-limiter.ts). */
  readonly logins: LoginLimiter;
  readonly tasks: Tasks;
  readonly storage: Storage;
  readonly methods: MethodTable;
  readonly host: { ref: string; uuid: string; address: string };
  readonly poolRef: string;
  readonly pool: PoolMembership;
  close(): Promise<void>;
}

export interface Feature {
  calls: MethodDef[];
  /** HTTP resources beside the API, by path without a trailing slash (e.g. "/import"). */
  routes?: Record<string, Route>;
  /** Registers event classes, task recoveries; runs after the pool and host exist. */
  start?: StartupStep;
}

/** How long closing waits for the transfers it stops to undo what they made (within `hangar serve`'s 15 s). */
export const TASK_STOP_MS = 10_000;

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
  const beatMs = options.heartbeatMs ?? heartbeatMs();
  const { poolRef, host } = await joinPool(db, objects, {
    uuid: hostUuid(dir),
    address: options.hostAddress ?? (process.env.HANGAR_HOST_ADDRESS || "127.0.0.1"),
    role: options.poolRole ?? poolRole(),
    heartbeatMs: beatMs,
  }).catch(async (error: unknown) => {
    // Refused (a second master): the database's connections must not keep the process alive.
    await db.close();
    throw error;
  });
  const pool = new PoolMembership(db, objects, host.ref, beatMs);
  const sessions = new Sessions(db, { timeoutMs: options.sessionTimeoutMs ?? 24 * 60 * 60 * 1000 });
  const { generated } = await sessions.ensureRoot(options.rootPassword);
  if (generated !== undefined) options.onGeneratedPassword?.(generated);
  const methods = new MethodTable();
  for (const feature of [...CORE, ...features]) methods.add(...feature.calls);
  registerStoredClasses(events, objects, "pool", "host", "task");

  const timers: NodeJS.Timeout[] = [];
  const ts: Toolstack = {
    dataDir: dir,
    db,
    events,
    objects,
    sessions,
    audit: new AuditLog(db, host.address),
    logins: new LoginLimiter(TOOLSTACK_LOGIN_LIMITS),
    tasks: new Tasks(objects, host.ref, (ref) => pool.isLive(ref)),
    storage: new Storage(options.pluginRoot, { timeoutMs: options.pluginTimeoutMs }),
    methods,
    host,
    poolRef,
    pool,
    close: async () => {
      await ts.tasks.stop(TASK_STOP_MS);
      for (const timer of timers) clearInterval(timer);
      await pool.leave().catch((error: unknown) => console.error("leaving the pool:", error instanceof Error ? error.message : error));
      await db.close();
    },
  };
  // Beating from the moment the host has joined: attaching its SRs may take longer than the pool waits for a beat.
  pool.start((dead, tx) => ts.tasks.failResidentOn(dead, tx));
  const housekeeping = async () => {
    await ts.tasks.collect();
    await ts.sessions.expire();
    await ts.audit.prune(new Date(Date.now() - auditRetentionMs()).toISOString());
  };
  try {
    for (const feature of features) await feature.start?.(ts);
    await ts.tasks.recover();
    await housekeeping();
  } catch (error) {
    await ts.close();
    throw error;
  }
  timers.push(setInterval(() => void housekeeping().catch((error: unknown) => console.error("housekeeping:", error)), HOUSEKEEPING_MS).unref());
  return ts;
}
