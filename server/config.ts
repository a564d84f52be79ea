// Where Hangar keeps host-local state. Everything is overridable by environment so tests, CI and several
// Hangar hosts on one machine stay apart.
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..");

// The ignore comments below (and where spool directories are made from the data dir) keep Next's build from
// tracing the data dir into the server output: it read every file there, so a build after a few multi-GiB
// export spools ran out of memory.

/** HANGAR_DATA_DIR, default `<repo>/data`. */
export function dataDir(): string {
  return resolve(/* turbopackIgnore: true */ process.env.HANGAR_DATA_DIR || join(repoRoot, "data"));
}

/** Sockets and pid files of daemons: HANGAR_RUN_DIR, default `<data dir>/run`. */
export function runDir(): string {
  return resolve(/* turbopackIgnore: true */ process.env.HANGAR_RUN_DIR || join(dataDir(), "run"));
}

/** rrdd protocol v2 datasource files: HANGAR_METRICS_DIR, default `<data dir>/metrics`. */
export function metricsDir(): string {
  return resolve(/* turbopackIgnore: true */ process.env.HANGAR_METRICS_DIR || join(dataDir(), "metrics"));
}

/** This host's installation uuid: HANGAR_HOST_UUID, else generated once and kept in the data dir (`dir`). */
export function hostUuid(dir: string = dataDir()): string {
  if (process.env.HANGAR_HOST_UUID) return process.env.HANGAR_HOST_UUID;
  // node:crypto loaded here only: every plugin call imports this module, and only the very first needs it.
  return readOrCreateFile(join(dir, "host-uuid"), () => `${process.getBuiltinModule("node:crypto").randomUUID()}\n`).trim();
}

/**
 * A file's text; a file that does not exist yet is first made with `content()` (and `mode`). When two first
 * callers race, both end up reading the one that won: link() never replaces.
 */
export function readOrCreateFile(file: string, content: () => string, mode = 0o644): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content(), { mode });
  try {
    linkSync(tmp, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    rmSync(tmp, { force: true });
  }
  return readFileSync(file, "utf8");
}

/** The Node 24 binary running us, for daemons that plugins start. */
export function nodeBinary(): string {
  return process.execPath;
}

/**
 * HANGAR_DATABASE_URL: a `postgres://` (or `postgresql://`) URL puts the toolstack's state in that PostgreSQL
 * database (shared by a pool's hosts); unset, it is SQLite in the data dir. Anything else is refused.
 */
export function databaseUrl(): string | undefined {
  const url = process.env.HANGAR_DATABASE_URL;
  if (url === undefined || url === "") return undefined;
  if (!/^postgres(ql)?:\/\//.test(url)) throw new Error(`HANGAR_DATABASE_URL must be a postgres:// URL (got ${url.replace(/\/\/[^@/]*@/, "//…@")}); leave it unset for the embedded SQLite.`);
  return url;
}

/** The toolstack the console talks to: HANGAR_TOOLSTACK_URL, default the local `hangar serve` (on HANGAR_TOOLSTACK_PORT). */
export function toolstackUrl(): string {
  return process.env.HANGAR_TOOLSTACK_URL || `http://127.0.0.1:${process.env.HANGAR_TOOLSTACK_PORT || 8080}`;
}

/** HANGAR_POOL_ROLE: `master` (the default) or `member` of a pool sharing HANGAR_DATABASE_URL. */
export function poolRole(value = process.env.HANGAR_POOL_ROLE): "master" | "member" {
  if (value === undefined || value === "" || value === "master") return "master";
  if (value === "member") return "member";
  throw new Error(`HANGAR_POOL_ROLE must be master or member (got ${value})`);
}

/**
 * How often a host tells the pool it is alive: HANGAR_HEARTBEAT_MS, default 2000. A host whose heartbeat is
 * five intervals old is taken for dead: its running tasks are failed.
 */
export function heartbeatMs(): number {
  const value = Number(process.env.HANGAR_HEARTBEAT_MS || 2000);
  if (!Number.isInteger(value) || value < 50) throw new Error(`HANGAR_HEARTBEAT_MS must be a whole number of milliseconds ≥ 50 (got ${process.env.HANGAR_HEARTBEAT_MS})`);
  return value;
}

/**
 * How long an upload's body may go without a byte while the service waits for one (HANGAR_BODY_IDLE_TIMEOUT,
 * seconds, default 60): a stalled client would otherwise hold its task, VM, volumes and datapaths for ever.
 */
export function bodyIdleTimeoutMs(): number {
  const value = Number(process.env.HANGAR_BODY_IDLE_TIMEOUT || 60);
  if (!(value > 0) || !Number.isFinite(value)) throw new Error(`HANGAR_BODY_IDLE_TIMEOUT must be a number of seconds > 0 (got ${process.env.HANGAR_BODY_IDLE_TIMEOUT})`);
  return value * 1000;
}

/** How long audit rows are kept (HANGAR_AUDIT_RETENTION_DAYS, default 365); older ones are removed daily. */
export function auditRetentionMs(): number {
  const value = Number(process.env.HANGAR_AUDIT_RETENTION_DAYS || 365);
  if (!(value > 0) || !Number.isFinite(value)) throw new Error(`HANGAR_AUDIT_RETENTION_DAYS must be a number of days > 0 (got ${process.env.HANGAR_AUDIT_RETENTION_DAYS})`);
  return value * 24 * 60 * 60 * 1000;
}

/**
 * Addresses whose X-Forwarded-For the toolstack believes, to name the client a call is made for in the audit
 * trail and the login limits (HANGAR_TRUSTED_PROXIES, comma-separated; default this host's loopback, where
 * `npm start` runs the console). "" trusts none.
 */
export function trustedProxies(): string[] {
  const value = process.env.HANGAR_TRUSTED_PROXIES ?? "127.0.0.1,::1";
  return value
    .split(",")
    .map((address) => address.trim())
    .filter((address) => address !== "");
}
