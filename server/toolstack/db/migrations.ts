// Schema migrations, applied in order, each in one transaction, recorded in schema_migrations. Every
// statement runs unchanged on SQLite and PostgreSQL; what SQL cannot compute on both (a date inside a record)
// a migration's `fill` does in code.
import type { Database, Queryable } from "./database.ts";
import { descriptionOf, statusOf } from "../object-columns.ts";
import { taskExpiry } from "../task-expiry.ts";
import type { XenRecord } from "../../xenapi/values.ts";

const MIGRATIONS: ReadonlyArray<{ version: number; statements: string[]; fill?: (tx: Queryable) => Promise<void> }> = [
  {
    version: 1,
    statements: [
      // Every XenAPI object the toolstack owns (pool, host, SR, VM, VBD, VIF, network, task) as its full
      // record; the columns beside it are what lookups go by. VDIs are not here: the plugins own volumes.
      `CREATE TABLE objects (
         ref TEXT PRIMARY KEY,
         class TEXT NOT NULL,
         uuid TEXT NOT NULL UNIQUE,
         name_label TEXT NOT NULL,
         record TEXT NOT NULL)`,
      "CREATE INDEX objects_by_class ON objects (class, name_label)",
      `CREATE TABLE users (
         name TEXT PRIMARY KEY,
         password_hash TEXT NOT NULL,
         created TEXT NOT NULL)`,
      `CREATE TABLE sessions (
         ref TEXT PRIMARY KEY,
         uuid TEXT NOT NULL UNIQUE,
         user_name TEXT NOT NULL,
         originator TEXT NOT NULL,
         created TEXT NOT NULL,
         last_active BIGINT NOT NULL)`,
      `CREATE TABLE events (
         id BIGINT PRIMARY KEY,
         class TEXT NOT NULL,
         ref TEXT NOT NULL,
         operation TEXT NOT NULL,
         timestamp TEXT NOT NULL,
         snapshot TEXT)`,
      "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
      "INSERT INTO counters (name, value) VALUES ('event', 0)",
      // Where a VDI lives (its SR and volume key), so a ref finds its plugin without listing every SR.
      // A locator, not a copy: the record itself always comes from the plugin.
      `CREATE TABLE vdi_locations (
         ref TEXT PRIMARY KEY,
         uuid TEXT NOT NULL UNIQUE,
         sr_ref TEXT NOT NULL,
         volume_key TEXT NOT NULL)`,
      "CREATE INDEX vdi_locations_by_sr ON vdi_locations (sr_ref, volume_key)",
    ],
  },
  {
    version: 2,
    statements: [
      // A pool of hosts: each host's last heartbeat (its own clock, ms), kept apart from the host records so
      // that beating makes no events; and the secret hosts authenticate to each other with (xapi's pool token).
      "CREATE TABLE host_heartbeats (host_ref TEXT PRIMARY KEY, beat_at BIGINT NOT NULL)",
      "CREATE TABLE pool_secret (id BIGINT PRIMARY KEY, secret TEXT NOT NULL)",
    ],
  },
  {
    version: 3,
    statements: [
      // Plugin calls that make a volume, under way (volume-intents.ts): the next start of their host undoes them.
      `CREATE TABLE volume_intents (
         id TEXT PRIMARY KEY,
         host_ref TEXT NOT NULL,
         sr_ref TEXT NOT NULL,
         volume_key TEXT,
         started TEXT NOT NULL)`,
    ],
  },
  {
    version: 4,
    statements: [
      // Who a session is (rbac/): root, the local superuser, whom no role limits; or a user let in by subjects
      // (their own and their groups'), holding the highest of those subjects' roles, computed at login.
      "ALTER TABLE sessions ADD COLUMN superuser BIGINT NOT NULL DEFAULT 0",
      "ALTER TABLE sessions ADD COLUMN role TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE sessions ADD COLUMN auth_user_sid TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE sessions ADD COLUMN subjects TEXT NOT NULL DEFAULT '[]'",
      "UPDATE sessions SET superuser = 1 WHERE user_name = 'root'",
      // The audit trail (rbac/audit.ts): one row per state-changing call or HTTP action, allowed or denied, and
      // per login; each row's hash covers the row before's, so a row removed or edited breaks the chain.
      `CREATE TABLE audit_log (
         id BIGINT PRIMARY KEY,
         time TEXT NOT NULL,
         host TEXT NOT NULL,
         trackid TEXT NOT NULL,
         subject_sid TEXT NOT NULL,
         subject_name TEXT NOT NULL,
         client TEXT NOT NULL,
         decision TEXT NOT NULL,
         outcome TEXT NOT NULL,
         kind TEXT NOT NULL,
         action TEXT NOT NULL,
         args TEXT NOT NULL,
         prev_hash TEXT NOT NULL,
         hash TEXT NOT NULL)`,
      "CREATE INDEX audit_log_by_time ON audit_log (time)",
      // The pool's external authentication (an LDAP directory): its settings, bind password included, which
      // no call answers (the hosts' records show them without it).
      `CREATE TABLE external_auth (
         id BIGINT PRIMARY KEY,
         type TEXT NOT NULL,
         service_name TEXT NOT NULL,
         config TEXT NOT NULL)`,
    ],
  },
  {
    version: 5,
    statements: [
      // When housekeeping may remove an object (ms; NULL: never), so it finds expired tasks without reading all.
      "ALTER TABLE objects ADD COLUMN expires BIGINT",
      "CREATE INDEX objects_by_expiry ON objects (class, expires, ref)",
      // A class's refs in order (get_all) straight from an index, not sorted per call.
      "CREATE INDEX objects_by_class_ref ON objects (class, ref)",
      // An object's latest event (a VDI's last record, patched when its VBDs change) without reading the log.
      "CREATE INDEX events_by_ref ON events (ref, id)",
      // Objects per class ('objects:<class>'), kept by the object store: valid_ref_counts without a COUNT(*).
      "INSERT INTO counters (name, value) SELECT 'objects:' || class, COUNT(*) FROM objects GROUP BY class",
    ],
    fill: async (tx) => {
      for (const row of await tx.all<{ ref: string; record: string }>("SELECT ref, record FROM objects WHERE class = 'task'")) {
        await tx.run("UPDATE objects SET expires = ? WHERE ref = ?", [taskExpiry(JSON.parse(row.record) as XenRecord), row.ref]);
      }
    },
  },
  {
    version: 6,
    statements: [
      // A task's status and every object's name_description beside the record, so pages of tasks
      // (task.hangar_get_page) filter, order and count without reading records: newest first is latest expiry first.
      "ALTER TABLE objects ADD COLUMN status TEXT",
      "ALTER TABLE objects ADD COLUMN name_description TEXT NOT NULL DEFAULT ''",
      "CREATE INDEX objects_by_status ON objects (class, status, expires, ref)",
    ],
    fill: async (tx) => {
      for (const row of await tx.all<{ ref: string; class: string; record: string }>("SELECT ref, class, record FROM objects")) {
        const record = JSON.parse(row.record) as XenRecord;
        await tx.run("UPDATE objects SET status = ?, name_description = ? WHERE ref = ?", [statusOf(row.class, record), descriptionOf(record), row.ref]);
      }
      // Objects per class and status ('objects:<class>:<status>'), kept by the object store: a page's total without a COUNT(*).
      await tx.run("INSERT INTO counters (name, value) SELECT 'objects:' || class || ':' || status, COUNT(*) FROM objects WHERE status IS NOT NULL GROUP BY class, status");
    },
  },
];

export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Brings the schema up to date (or to version `to`: tests of a migration); refuses a database made by a newer
 * Hangar. One transaction for all of it: hosts starting together on one PostgreSQL database migrate it once,
 * the others then find it current.
 */
export async function migrate(db: Database, options: { to?: number } = {}): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.run("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied TEXT NOT NULL)");
    const row = await tx.get<{ version: number | null }>("SELECT MAX(version) AS version FROM schema_migrations");
    const current = Number(row?.version ?? 0);
    if (current > SCHEMA_VERSION) {
      throw new Error(`the database has schema version ${current}, newer than this Hangar's ${SCHEMA_VERSION}: upgrade Hangar`);
    }
    for (const migration of MIGRATIONS.filter((m) => m.version > current && m.version <= (options.to ?? SCHEMA_VERSION))) {
      for (const statement of migration.statements) await tx.run(statement);
      await migration.fill?.(tx);
      await tx.run("INSERT INTO schema_migrations (version, applied) VALUES (?, ?)", [migration.version, new Date().toISOString()]);
    }
  });
}
