// The XenAPI objects the toolstack owns, each stored whole as its record (objects table). Every change
// appends an event in the same transaction, so event.from sees exactly what was committed. Beside each record:
// when housekeeping may remove it and its status (tasks), its name_description, and a count per class and per
// class and status (counters), all kept here whoever writes.
import type { Database, Queryable, SqlValue } from "./db/database.ts";
import type { EventLog } from "./events.ts";
import { counterOf, descriptionOf, expiryOf, statusOf } from "./object-columns.ts";
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

/** The columns kept beside a record, from it, whoever writes it (create and update alike). */
const COLUMNS = ["uuid", "name_label", "record", "expires", "status", "name_description"] as const;
const columnValues = (cls: string, record: XenRecord) => [String(record.uuid), String(record.name_label ?? ""), JSON.stringify(record), expiryOf(cls, record), statusOf(cls, record), descriptionOf(record)];

const decode = (row: ObjectRow): StoredObject => ({ ref: row.ref, record: JSON.parse(row.record) as XenRecord });

/** An object past its expiry: where a page of them ends. */
export interface Expired {
  ref: string;
  expires: number;
}

/** A page of a class's objects whose status is one of `statuses`. */
export interface StatusQuery {
  statuses: readonly string[];
  /** Contained in name_label or name_description, case aside (ASCII on SQLite). */
  text?: string;
  offset: number;
  limit: number;
}

/** `%text%` for LIKE … ESCAPE '!'. */
const containing = (text: string) => `%${text.replace(/[!%_]/g, "!$&")}%`;

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

  /** Objects of a class (of one of `statuses`, for a class with a status), from the counters. */
  async count(cls: string, statuses?: readonly string[]): Promise<number> {
    const names = statuses === undefined ? [counterOf(cls)] : statuses.map((status) => counterOf(cls, status));
    if (names.length === 0) return 0;
    const rows = await this.#db.all<{ value: number }>(`SELECT value FROM counters WHERE name IN (${names.map(() => "?").join(", ")})`, names);
    return rows.reduce((sum, row) => sum + Number(row.value), 0);
  }

  async #recount(tx: Queryable, counter: string, change: 1 | -1): Promise<void> {
    if ((await tx.run("UPDATE counters SET value = value + ? WHERE name = ?", [change, counter])) === 0) {
      await tx.run("INSERT INTO counters (name, value) VALUES (?, ?)", [counter, Math.max(0, change)]);
    }
  }

  /** The counters of an object's class and status as it changes from `before` to `after` (null: none). */
  async #recountStatus(tx: Queryable, cls: string, before: string | null, after: string | null): Promise<void> {
    if (before === after) return;
    if (before !== null) await this.#recount(tx, counterOf(cls, before), -1);
    if (after !== null) await this.#recount(tx, counterOf(cls, after), 1);
  }

  /**
   * A page of the refs of a class's objects whose status is one of `query.statuses`, the latest expiry first (then
   * the greater ref; those that never expire last), and how many match in all. Through the status and expiry
   * indexes and the counters: no record is read. A text to look for is sought in every matching object's names.
   */
  async pageByStatus(cls: string, query: StatusQuery): Promise<{ refs: string[]; total: number }> {
    if (query.statuses.length === 0) return { refs: [], total: 0 };
    const text = query.text?.trim().toLowerCase() ?? "";
    const named = text === "" ? "" : " AND (LOWER(name_label) LIKE ? ESCAPE '!' OR LOWER(name_description) LIKE ? ESCAPE '!')";
    const where = `class = ? AND status IN (${query.statuses.map(() => "?").join(", ")})${named}`;
    const params: SqlValue[] = [cls, ...query.statuses, ...(text === "" ? [] : [containing(text), containing(text)])];
    const counted = async (sql: string) => Number((await this.#db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM objects WHERE ${sql}`, params))?.n ?? 0);
    const total = text === "" ? await this.count(cls, query.statuses) : await counted(where);
    // The engines order NULLs apart (SQLite last, PostgreSQL first): objects that never expire are read on their own.
    const undated = await counted(`${where} AND expires IS NULL`);
    const dated = total - undated;
    const refs: string[] = [];
    if (query.limit > 0 && query.offset < dated) {
      if (text === "") refs.push(...(await this.#latestByStatus(cls, query.statuses, query.offset, query.limit)));
      else {
        const rows = await this.#db.all<{ ref: string }>(`SELECT ref FROM objects WHERE ${where} AND expires IS NOT NULL ORDER BY expires DESC, ref DESC LIMIT ? OFFSET ?`, [
          ...params,
          query.limit,
          query.offset,
        ]);
        refs.push(...rows.map((row) => row.ref));
      }
    }
    const left = query.limit - refs.length;
    if (left > 0 && undated > 0 && query.offset + query.limit > dated) {
      const rows = await this.#db.all<{ ref: string }>(`SELECT ref FROM objects WHERE ${where} AND expires IS NULL ORDER BY ref DESC LIMIT ? OFFSET ?`, [
        ...params,
        left,
        Math.max(0, query.offset - dated),
      ]);
      refs.push(...rows.map((row) => row.ref));
    }
    return { refs, total };
  }

  /**
   * A page of the objects with an expiry and one of `statuses`, the latest first: each status read on its own in
   * the status index's order (a planner reading several at once may scan them all for a few), merged here.
   */
  async #latestByStatus(cls: string, statuses: readonly string[], offset: number, limit: number): Promise<string[]> {
    const latest = (status: string, skip: number, take: number) =>
      this.#db.all<Expired>("SELECT ref, expires FROM objects WHERE class = ? AND status = ? AND expires IS NOT NULL ORDER BY expires DESC, ref DESC LIMIT ? OFFSET ?", [
        cls,
        status,
        take,
        skip,
      ]);
    if (statuses.length === 1) return (await latest(statuses[0]!, offset, limit)).map((row) => row.ref);
    const rows: Expired[] = [];
    for (const status of statuses) rows.push(...(await latest(status, 0, offset + limit)));
    const later = (a: Expired, b: Expired) => Number(b.expires) - Number(a.expires) || (a.ref < b.ref ? 1 : a.ref > b.ref ? -1 : 0);
    return rows.sort(later).slice(offset, offset + limit).map((row) => row.ref);
  }

  /** The objects of `refs` in that order; those gone since are left out. */
  async many(cls: string, refs: readonly string[]): Promise<StoredObject[]> {
    if (refs.length === 0) return [];
    const rows = await this.#db.all<ObjectRow>(`SELECT ref, record FROM objects WHERE class = ? AND ref IN (${refs.map(() => "?").join(", ")})`, [cls, ...refs]);
    const byRef = new Map(rows.map((row) => [row.ref, row]));
    return refs.flatMap((ref) => {
      const row = byRef.get(ref);
      return row === undefined ? [] : [decode(row)];
    });
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
      const status = statusOf(cls, record);
      await tx.run(`INSERT INTO objects (ref, class, ${COLUMNS.join(", ")}) VALUES (?, ?, ${COLUMNS.map(() => "?").join(", ")})`, [ref, cls, ...columnValues(cls, record)]);
      await this.#recount(tx, counterOf(cls), 1);
      await this.#recountStatus(tx, cls, null, status);
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
      const status = statusOf(cls, record);
      await tx.run(`UPDATE objects SET ${COLUMNS.map((column) => `${column} = ?`).join(", ")} WHERE ref = ?`, [...columnValues(cls, record), ref]);
      await this.#recountStatus(tx, cls, statusOf(cls, current.record), status);
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
    await this.#recount(tx, counterOf(cls), -1);
    await this.#recountStatus(tx, cls, statusOf(cls, current.record), null);
    await this.#events.append(tx, cls, current.ref, "del", current.record);
  }
}

/** Registers stored classes for event.from: listed, counted and found (one object by its key) from this store. */
export function registerStoredClasses(events: EventLog, objects: ObjectStore, ...classes: string[]): void {
  for (const cls of classes) {
    events.registerClass(cls, () => objects.all(cls), () => objects.count(cls), async (ref) => (await objects.find(cls, ref))?.record);
  }
}
