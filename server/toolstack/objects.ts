// The XenAPI objects the toolstack owns, each stored whole as its record (objects table). Every change
// appends an event in the same transaction, so event.from sees exactly what was committed.
import type { Database, Queryable } from "./db/database.ts";
import type { EventLog } from "./events.ts";
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

  async count(cls: string): Promise<number> {
    const row = await this.#db.get<{ n: number }>("SELECT COUNT(*) AS n FROM objects WHERE class = ?", [cls]);
    return Number(row?.n ?? 0);
  }

  /** Stores a new object (ref made here unless given); `record.uuid` must be set. */
  async create(cls: string, record: XenRecord, options: { ref?: string; db?: Queryable } = {}): Promise<StoredObject> {
    const ref = options.ref ?? newRef();
    const write = async (tx: Queryable) => {
      await tx.run("INSERT INTO objects (ref, class, uuid, name_label, record) VALUES (?, ?, ?, ?, ?)", [
        ref,
        cls,
        String(record.uuid),
        String(record.name_label ?? ""),
        JSON.stringify(record),
      ]);
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
      await tx.run("UPDATE objects SET uuid = ?, name_label = ?, record = ? WHERE ref = ?", [String(record.uuid), String(record.name_label ?? ""), JSON.stringify(record), ref]);
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
    const write = async (tx: Queryable) => {
      const current = await this.get(cls, ref, tx);
      await tx.run("DELETE FROM objects WHERE ref = ?", [ref]);
      await this.#events.append(tx, cls, ref, "del", current.record);
    };
    await (db ? write(db) : this.#db.transaction(write));
  }
}
