// The pool's hosts. Every toolstack process is one host: it registers itself (its address and ports), beats
// a heartbeat into the shared database, and watches the others' heartbeats. The pool has one master at a
// time: a host started as master takes the role only from a master that is dead (or from nobody). A host
// whose heartbeat stops is marked not live and its running tasks failed with the reason; when it comes back
// its own restart recovery cleans up after them.
import { hostname } from "node:os";
import type { Database, Queryable } from "./db/database.ts";
import type { ObjectStore, StoredObject } from "./objects.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { NULL_REF, type XenRecord } from "../xenapi/values.ts";
import { HTTP_PORT_KEY, HTTPS_PORT_KEY } from "../xenapi/hosts.ts";

/** A host is taken for dead once its heartbeat is this many intervals old. */
const DEAD_AFTER_BEATS = 5;
/** host other_config keys of the ports the host serves on (what redirects and pool calls are sent to). */

export const API_VERSION = { major: 2, minor: 21 } as const;

export interface HostOptions {
  uuid: string;
  /** The address other hosts and clients reach this one at (HANGAR_HOST_ADDRESS). */
  address: string;
  role: "master" | "member";
  heartbeatMs: number;
}

export interface JoinedPool {
  poolRef: string;
  host: { ref: string; uuid: string; address: string };
}

export const hostErrors = {
  hostOffline: (host: StoredObject) =>
    new XenApiError("HOST_OFFLINE", [host.ref, `the host ${String(host.record.name_label)} (${String(host.record.address)}) is offline: its heartbeat stopped`]),
};

/**
 * Registers this host (first start) or updates its address, makes the pool on the very first start, and
 * takes the master role when asked to and the master is dead. One transaction: hosts starting together on
 * one PostgreSQL database see each other's outcome.
 */
export async function joinPool(db: Database, objects: ObjectStore, options: HostOptions): Promise<JoinedPool> {
  return db.transaction(async (tx) => {
    let host = (await objects.all("host", tx)).find((h) => h.record.uuid === options.uuid);
    if (host === undefined) host = await objects.create("host", hostRecord(options.uuid, options.address), { db: tx });
    else if (host.record.address !== options.address || host.record.live !== true) {
      await objects.set("host", host.ref, { address: options.address, live: true }, tx);
    }
    let pool = (await objects.all("pool", tx))[0];
    if (pool === undefined) {
      if (options.role === "member") throw new Error("this host was started as a pool member, but the database has no pool yet: start the master first");
      pool = await objects.create("pool", poolRecord(host.ref), { db: tx });
    } else if (options.role === "master" && pool.record.master !== host.ref) {
      const master = await objects.find("host", String(pool.record.master), tx);
      if (master !== undefined && (await beatAge(tx, master.ref)) <= options.heartbeatMs * DEAD_AFTER_BEATS) {
        throw new Error(
          `the pool's master ${String(master.record.name_label)} (${String(master.record.address)}) is alive: start this host as a member (HANGAR_POOL_ROLE=member), or stop that one first`,
        );
      }
      await objects.set("pool", pool.ref, { master: host.ref }, tx);
    }
    // The pool's first start, or its first under a Hangar that has pools.
    if ((await tx.get("SELECT id FROM pool_secret WHERE id = 1")) === undefined) {
      await tx.run("INSERT INTO pool_secret (id, secret) VALUES (1, ?)", [crypto.randomUUID()]);
    }
    await beat(tx, host.ref);
    return { poolRef: pool.ref, host: { ref: host.ref, uuid: options.uuid, address: options.address } };
  });
}

async function beat(db: Queryable, hostRef: string): Promise<void> {
  const now = Date.now();
  if ((await db.run("UPDATE host_heartbeats SET beat_at = ? WHERE host_ref = ?", [now, hostRef])) === 0) {
    await db.run("INSERT INTO host_heartbeats (host_ref, beat_at) VALUES (?, ?)", [hostRef, now]);
  }
}

/** Milliseconds since the host's last heartbeat; Infinity for a host that never beat. */
async function beatAge(db: Queryable, hostRef: string): Promise<number> {
  const row = await db.get<{ beat_at: number }>("SELECT beat_at FROM host_heartbeats WHERE host_ref = ?", [hostRef]);
  return row === undefined ? Infinity : Date.now() - Number(row.beat_at);
}

/** What a host that sees another die does about it: fails the tasks that host was running. */
export type OnHostDead = (host: StoredObject, tx: Queryable) => Promise<void>;

/** This host's side of the pool once joined: its heartbeat, the watch over the others, who is alive, the secret. */
export class PoolMembership {
  readonly #db: Database;
  readonly #objects: ObjectStore;
  readonly #self: string;
  readonly #heartbeatMs: number;
  #timer: NodeJS.Timeout | undefined;
  #secret: string | undefined;
  #onDead: OnHostDead = async () => {};
  #watching: Promise<void> = Promise.resolve();

  constructor(db: Database, objects: ObjectStore, self: string, heartbeatMs: number) {
    this.#db = db;
    this.#objects = objects;
    this.#self = self;
    this.#heartbeatMs = heartbeatMs;
  }

  get deadAfterMs(): number {
    return this.#heartbeatMs * DEAD_AFTER_BEATS;
  }

  /** Starts beating and watching; `onDead` runs once for each host seen to die, in the transaction that marks it. */
  start(onDead: OnHostDead): void {
    this.#onDead = onDead;
    let ticking = false;
    const tick = () => {
      // A tick slower than the interval (a loaded database) is not run twice at once.
      if (ticking) return;
      ticking = true;
      this.#watching = this.#tick()
        .catch((error: unknown) => console.error("pool heartbeat:", error instanceof Error ? error.message : error))
        .finally(() => (ticking = false));
    };
    tick();
    this.#timer = setInterval(tick, this.#heartbeatMs).unref();
  }

  async #tick(): Promise<void> {
    await beat(this.#db, this.#self);
    const beats = new Map(
      (await this.#db.all<{ host_ref: string; beat_at: number }>("SELECT host_ref, beat_at FROM host_heartbeats")).map((row) => [row.host_ref, Number(row.beat_at)]),
    );
    const now = Date.now();
    for (const host of await this.#objects.all("host")) {
      if (host.ref === this.#self) {
        // Taken for dead while it stalled (its tasks were failed, and abort here): it is alive again.
        if (host.record.live !== true) {
          await this.#objects.set("host", host.ref, { live: true });
          console.error("this host was taken for dead by the pool while it stalled: live again");
        }
        continue;
      }
      if (host.record.live !== true || now - (beats.get(host.ref) ?? -Infinity) <= this.deadAfterMs) continue;
      await this.#db.transaction(async (tx) => {
        // Another host may have seen it first, or it may have come back meanwhile.
        const current = await this.#objects.find("host", host.ref, tx);
        if (current?.record.live !== true || (await beatAge(tx, host.ref)) <= this.deadAfterMs) return;
        await this.#objects.set("host", host.ref, { live: false }, tx);
        await this.#onDead(current, tx);
      });
      console.error(`host ${String(host.record.name_label)} (${String(host.record.address)}) stopped beating: taken for dead`);
    }
  }

  /** Whether the host beats (this host always does). */
  async isLive(hostRef: string): Promise<boolean> {
    if (hostRef === this.#self) return true;
    return (await beatAge(this.#db, hostRef)) <= this.deadAfterMs;
  }

  /** The secret hosts of this pool call each other with (never shown through the API). */
  async secret(): Promise<string> {
    this.#secret ??= (await this.#db.get<{ secret: string }>("SELECT secret FROM pool_secret WHERE id = 1"))?.secret;
    if (this.#secret === undefined) throw new Error("the pool has no secret: its database was made by an older Hangar; start the master once to add it");
    return this.#secret;
  }

  /** Records the ports this host serves on, once it listens. */
  async announce(ports: { http: number; https: number | null }): Promise<void> {
    await this.#objects.update("host", this.#self, (record) => ({
      ...record,
      other_config: {
        ...(record.other_config as Record<string, string>),
        [HTTP_PORT_KEY]: String(ports.http),
        ...(ports.https === null ? {} : { [HTTPS_PORT_KEY]: String(ports.https) }),
      },
    }));
  }

  /** Stops beating; the host is marked not live (a clean stop), so that nobody waits for it. */
  async leave(): Promise<void> {
    clearInterval(this.#timer);
    await this.#watching;
    await this.#db.run("DELETE FROM host_heartbeats WHERE host_ref = ?", [this.#self]);
    await this.#objects.set("host", this.#self, { live: false });
  }
}

function hostRecord(uuid: string, address: string): XenRecord {
  const name = hostname();
  return {
    uuid,
    name_label: name,
    name_description: "",
    hostname: name,
    address,
    enabled: true,
    live: true,
    API_version_major: API_VERSION.major,
    API_version_minor: API_VERSION.minor,
    API_version_vendor: "Hangar",
    software_version: { product_brand: "Hangar", product_version: "0.1.0", xapi: `${API_VERSION.major}.${API_VERSION.minor}` },
    other_config: {},
    external_auth_type: "",
    external_auth_service_name: "",
    external_auth_configuration: {},
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
