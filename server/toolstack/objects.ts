// The XenAPI objects the toolstack owns, each stored whole as its record (objects table). Every change
// appends an event in the same transaction, so event.from sees exactly what was committed. Beside each record:
// when housekeeping may remove it (tasks), and a count per class (counters), both kept here whoever writes.
import type { Database, Queryable } from "./db/database.ts";
import type { EventLog } from "./events.ts";
import { taskExpiry } from "./task-expiry.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { newRef, type XenRecord } from "../xenapi/values.ts";

export interface StoredObject {
  ref: string;
  record: XenRecord;
}

interface ObjectRow {
  ref: string;
  record: string;
}

const decode = (row: ObjectRow): StoredObject => ({ ref: row.ref, record: JSON.parse(row.record) as XenRecord });

/** The classes whose objects expire, and when (ms). */
const EXPIRY: Readonly<Record<string, (record: XenRecord) => number | null>> = { task: taskExpiry };
const expiryOf = (cls: string, record: XenRecord): number | null => EXPIRY[cls]?.(record) ?? null;

const counterOf = (cls: string) => `objects:${cls}`;

/** An object past its expiry: where a page of them ends. */
export interface Expired {
  ref: string;
  expires: number;
}

export class ObjectStore {
  readonly #db: Database;
  readonly #events: EventLog;

  constructor(db: Database, events: EventLog) {
    this.#db = db;
    this.#events = events;
  }

  async find(cls: string, ref: string, db: Queryable = this.#db): Promise<StoredObject | undefined> {
    const row = await db.get<ObjectRow>("SELECT ref, record FROM objects WHERE ref = ? AND class = ?", [ref, cls]);
    return row === undefined ? undefined : decode(row);
  }

  /** The object, or HANDLE_INVALID naming the class and ref. */
  async get(cls: string, ref: string, db: Queryable = this.#db): Promise<StoredObject> {
    const found = await this.find(cls, ref, db);
    if (found === undefined) throw xenErrors.handleInvalid(cls, ref);
    return found;
  }

  async getByUuid(cls: string, uuid: string): Promise<StoredObject> {
    const row = await this.#db.get<ObjectRow>("SELECT ref, record FROM objects WHERE uuid = ? AND class = ?", [uuid, cls]);
    if (row === undefined) throw xenErrors.uuidInvalid(cls, uuid);
    return decode(row);
  }

  async getByNameLabel(cls: string, name: string): Promise<StoredObject[]> {
    return (await this.#db.all<ObjectRow>("SELECT ref, record FROM objects WHERE class = ? AND name_label = ? ORDER BY ref", [cls, name])).map(decode);
  }

  async all(cls: string, db: Queryable = this.#db): Promise<StoredObject[]> {
    return (await db.all<ObjectRow>("SELECT ref, record FROM objects WHERE class = ? ORDER BY ref", [cls])).map(decode);
  }

  /** The refs of a class, in the order of all(), without reading the records. */
  async refs(cls: string, db: Queryable = this.#db): Promise<string[]> {
    return (await db.all<{ ref: string }>("SELECT ref FROM objects WHERE class = ? ORDER BY ref", [cls])).map((row) => row.ref);
  }

  async count(cls: string): Promise<number> {
    const row = await this.#db.get<{ value: number }>("SELECT value FROM counters WHERE name = ?", [counterOf(cls)]);
    return Number(row?.value ?? 0);
  }

  async #recount(tx: Queryable, cls: string, change: 1 | -1): Promise<void> {
    if ((await tx.run("UPDATE counters SET value = value + ? WHERE name = ?", [change, counterOf(cls)])) === 0) {
      await tx.run("INSERT INTO counters (name, value) VALUES (?, ?)", [counterOf(cls), Math.max(0, change)]);
    }
  }

  /**
   * Up to `limit` objects of a class that expired before `now`, by expiry then ref, after `after` (the last of
   * the page before): refs only, read through the expiry index.
   */
  async expired(cls: string, now: number, limit: number, after?: Expired): Promise<Expired[]> {
    const rows =
      after === undefined
        ? await this.#db.all<Expired>("SELECT ref, expires FROM objects WHERE class = ? AND expires < ? ORDER BY expires, ref LIMIT ?", [cls, now, limit])
        : await this.#db.all<Expired>(
            "SELECT ref, expires FROM objects WHERE class = ? AND expires < ? AND (expires > ? OR (expires = ? AND ref > ?)) ORDER BY expires, ref LIMIT ?",
            [cls, now, after.expires, after.expires, after.ref, limit],
          );
    return rows.map((row) => ({ ref: row.ref, expires: Number(row.expires) }));
  }

  /** Destroys, in one transaction, those of `refs` still expired before `now` (one may have changed since it was listed). */
  async destroyExpired(cls: string, refs: readonly string[], now: number): Promise<number> {
    return this.#db.transaction(async (tx) => {
      let destroyed = 0;
      for (const ref of refs) {
        const row = await tx.get<ObjectRow & { expires: number | null }>("SELECT ref, record, expires FROM objects WHERE ref = ? AND class = ?", [ref, cls]);
        if (row === undefined || row.expires === null || Number(row.expires) >= now) continue;
        await this.#remove(tx, cls, decode(row));
        destroyed++;
      }
      return destroyed;
    });
  }

  /** Stores a new object (ref made here unless given); `record.uuid` must be set. */
  async create(cls: string, record: XenRecord, options: { ref?: string; db?: Queryable } = {}): Promise<StoredObject> {
    const ref = options.ref ?? newRef();
    const write = async (tx: Queryable) => {
      await tx.run("INSERT INTO objects (ref, class, uuid, name_label, record, expires) VALUES (?, ?, ?, ?, ?, ?)", [
        ref,
        cls,
        String(record.uuid),
        String(record.name_label ?? ""),
        JSON.stringify(record),
        expiryOf(cls, record),
      ]);
      await this.#recount(tx, cls, 1);
      await this.#events.append(tx, cls, ref, "add", record);
    };
    await (options.db ? write(options.db) : this.#db.transaction(write));
    return { ref, record };
  }

  /** Changes a record in one transaction: `change` gets the current record and returns the new one. */
  async update(cls: string, ref: string, change: (record: XenRecord) => XenRecord, db?: Queryable): Promise<XenRecord> {
    const write = async (tx: Queryable) => {
      const current = await this.get(cls, ref, tx);
      const record = change(current.record);
      await tx.run("UPDATE objects SET uuid = ?, name_label = ?, record = ?, expires = ? WHERE ref = ?", [
        String(record.uuid),
        String(record.name_label ?? ""),
        JSON.stringify(record),
        expiryOf(cls, record),
        ref,
      ]);
      await this.#events.append(tx, cls, ref, "mod", record);
      return record;
    };
    return db ? write(db) : this.#db.transaction(write);
  }

  /** Sets fields of a record. */
  set(cls: string, ref: string, fields: XenRecord, db?: Queryable): Promise<XenRecord> {
    return this.update(cls, ref, (record) => ({ ...record, ...fields }), db);
  }

  async destroy(cls: string, ref: string, db?: Queryable): Promise<void> {
    const write = async (tx: Queryable) => this.#remove(tx, cls, await this.get(cls, ref, tx));
    await (db ? write(db) : this.#db.transaction(write));
  }

  async #remove(tx: Queryable, cls: string, current: StoredObject): Promise<void> {
    await tx.run("DELETE FROM objects WHERE ref = ?", [current.ref]);
    await this.#recount(tx, cls, -1);
    await this.#events.append(tx, cls, current.ref, "del", current.record);
  }
}

/** Registers stored classes for event.from: listed, counted and found (one object by its key) from this store. */
export function registerStoredClasses(events: EventLog, objects: ObjectStore, ...classes: string[]): void {
  for (const cls of classes) {
    events.registerClass(cls, () => objects.all(cls), () => objects.count(cls), async (ref) => (await objects.find(cls, ref))?.record);
  }
}
