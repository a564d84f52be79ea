// The event log behind event.from / event.inject: one row per committed change, numbered by a counter kept
// in the database (so several hosts sharing one database number them alike). A token is the number of the
// last event a client has seen; the log keeps the latest MAX_EVENTS, and a token older than that gets
// EVENTS_LOST (the client then reads everything again, as xapi clients do). Classes are answered in lower
// case, as xapi names them in events and valid_ref_counts ("vm", "sr", "pbd").
import type { Database, Queryable } from "./db/database.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { present, type XenRecord, type XenValue } from "../xenapi/values.ts";

const MAX_EVENTS = 10_000;
/** Events read from the database at a time. */
const PAGE = 1000;
/** How often a waiting event.from looks at the database for events another process committed. */
const POLL_MS = 1000;

interface EventRow {
  id: number;
  class: string;
  ref: string;
  operation: string;
  timestamp: string;
  snapshot: string | null;
}

/** Lists the current objects of a class (for a token of "" and for valid_ref_counts). */
export type ClassLister = () => Promise<Array<{ ref: string; record: XenRecord }>>;
/** One object of a class as its lister gives it; undefined when there is none by that ref. */
export type ObjectFinder = (ref: string) => Promise<XenRecord | undefined>;

interface Wanted {
  classes: string[];
  /** Classes subscribed to whole. */
  whole: ReadonlySet<string>;
  /** The objects named ("class/ref") of each class not subscribed to whole. */
  named: ReadonlyMap<string, ReadonlySet<string>>;
  matches(cls: string, ref: string): boolean;
}

export interface EventBatch {
  events: XenValue[];
  valid_ref_counts: Record<string, number>;
  token: string;
}

export class EventLog {
  readonly #db: Database;
  readonly #waiters = new Set<() => void>();
  readonly #listers = new Map<string, ClassLister>();
  readonly #counters = new Map<string, () => Promise<number>>();
  readonly #finders = new Map<string, ObjectFinder>();
  #appended = 0;
  /** An event was appended in a transaction not yet committed: waiting readers are woken once it is. */
  #unannounced = false;

  constructor(db: Database) {
    this.#db = db;
    db.onCommit(() => {
      if (!this.#unannounced) return;
      this.#unannounced = false;
      this.#wake();
    });
  }

  /**
   * Registers how to list a class's objects (every class event.from can name) and, where listing is dear
   * (VDIs: an SR.ls per SR), how to count them for valid_ref_counts, which every answer carries, and how to find
   * one object, so a snapshot of named objects ("task/<ref>") does not list the whole class.
   */
  registerClass(cls: string, lister: ClassLister, counter?: () => Promise<number>, finder?: ObjectFinder): void {
    this.#listers.set(cls, lister);
    if (counter !== undefined) this.#counters.set(cls, counter);
    if (finder !== undefined) this.#finders.set(cls, finder);
  }

  /** The class as registered, whatever its case (xapi's clients write "vm" and "VM" alike). */
  canonicalClass(name: string): string | undefined {
    const lower = name.toLowerCase();
    return [...this.#listers.keys()].find((cls) => cls.toLowerCase() === lower);
  }

  get classes(): string[] {
    return [...this.#listers.keys()];
  }

  /** Appends an event inside the caller's transaction; waiting readers are woken. */
  async append(tx: Queryable, cls: string, ref: string, operation: "add" | "mod" | "del", snapshot: XenRecord | null): Promise<number> {
    await tx.run("UPDATE counters SET value = value + 1 WHERE name = 'event'");
    const id = Number((await tx.get<{ value: number }>("SELECT value FROM counters WHERE name = 'event'"))!.value);
    await tx.run("INSERT INTO events (id, class, ref, operation, timestamp, snapshot) VALUES (?, ?, ?, ?, ?, ?)", [
      id,
      cls,
      ref,
      operation,
      (Date.now() / 1000).toFixed(3),
      snapshot === null ? null : JSON.stringify(snapshot),
    ]);
    if (++this.#appended % 1000 === 0) await tx.run("DELETE FROM events WHERE id <= ?", [id - MAX_EVENTS]);
    this.#unannounced = true;
    return id;
  }

  /** An event for an object outside any other change (event.inject, VDI changes made through plugins). */
  record(cls: string, ref: string, operation: "add" | "mod" | "del", snapshot: XenRecord | null): Promise<number> {
    return this.#db.transaction((tx) => this.append(tx, cls, ref, operation, snapshot));
  }

  /** The record the latest event of an object carried: undefined when the log holds none, null when it was a removal. */
  async latest(cls: string, ref: string): Promise<XenRecord | null | undefined> {
    const row = await this.#db.get<{ operation: string; snapshot: string | null }>("SELECT operation, snapshot FROM events WHERE ref = ? AND class = ? ORDER BY id DESC LIMIT 1", [ref, cls]);
    if (row === undefined) return undefined;
    return row.operation === "del" || row.snapshot === null ? null : (JSON.parse(row.snapshot) as XenRecord);
  }

  async currentToken(): Promise<string> {
    const row = await this.#db.get<{ value: number }>("SELECT value FROM counters WHERE name = 'event'");
    return String(Number(row?.value ?? 0));
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /**
   * event.from: events after `token` for `classes` ("*" for all; "task/OpaqueRef:…" for one object),
   * waiting up to `timeout` seconds for the first. Token "" answers the current objects as "add" events.
   */
  async from(classes: readonly string[], token: string, timeout: number): Promise<EventBatch> {
    const wanted = this.#resolveClasses(classes);
    if (token === "") return this.#snapshot(wanted);
    if (!/^\d+$/.test(token)) throw xenErrors.eventFromTokenParseFailure(token);
    let after = Number(token);
    const deadline = Date.now() + Math.max(0, timeout) * 1000;
    for (;;) {
      const oldest = await this.#db.get<{ id: number | null }>("SELECT MIN(id) AS id FROM events");
      if (oldest?.id !== null && oldest?.id !== undefined && after < Number(oldest.id) - 1) throw xenErrors.eventsLost();
      const rows = await this.#db.all<EventRow>(`SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ${PAGE}`, [after]);
      const matching = rows.filter((row) => wanted.matches(row.class, row.ref));
      // Events of other classes are passed over for good: the next page or wait starts after them.
      if (rows.length > 0) after = Number(rows[rows.length - 1]!.id);
      if (matching.length > 0 || Date.now() >= deadline) {
        return { events: matching.map(toEvent), valid_ref_counts: await this.#counts(wanted.classes), token: String(after) };
      }
      if (rows.length < PAGE) await this.#wait(Math.min(POLL_MS, deadline - Date.now()));
    }
  }

  #wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
    });
  }

  #resolveClasses(names: readonly string[]): Wanted {
    if (names.includes("*")) return { classes: this.classes, whole: new Set(this.classes), named: new Map(), matches: () => true };
    const whole = new Set<string>();
    const named = new Map<string, Set<string>>();
    for (const name of names) {
      const [clsName, ref] = name.split("/", 2) as [string, string | undefined];
      const cls = this.canonicalClass(clsName);
      if (cls === undefined) continue; // xapi ignores classes it does not know
      if (ref === undefined) whole.add(cls);
      else named.set(cls, (named.get(cls) ?? new Set()).add(ref));
    }
    for (const cls of whole) named.delete(cls);
    const classes = [...new Set([...whole, ...named.keys()])];
    return { classes, whole, named, matches: (cls, ref) => whole.has(cls) || named.get(cls)?.has(ref) === true };
  }

  #count(cls: string): Promise<number> {
    return this.#counters.get(cls)?.() ?? this.#listers.get(cls)!().then((all) => all.length);
  }

  async #counts(classes: readonly string[]): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const cls of classes) counts[cls.toLowerCase()] = await this.#count(cls);
    return counts;
  }

  /** The current objects of `cls` the subscription wants; with its count where they were all listed anyway. */
  async #current(cls: string, wanted: Wanted): Promise<{ objects: Array<{ ref: string; record: XenRecord }>; count?: number }> {
    const refs = wanted.named.get(cls);
    const find = this.#finders.get(cls);
    if (refs === undefined || find === undefined) {
      const all = await this.#listers.get(cls)!();
      return { objects: all.filter(({ ref }) => wanted.matches(cls, ref)), count: all.length };
    }
    const objects: Array<{ ref: string; record: XenRecord }> = [];
    // In ref order, as a listing gives them.
    for (const ref of [...refs].sort()) {
      const record = await find(ref);
      if (record !== undefined) objects.push({ ref, record });
    }
    return { objects };
  }

  async #snapshot(wanted: Wanted): Promise<EventBatch> {
    const token = await this.currentToken();
    const events: XenValue[] = [];
    const counts: Record<string, number> = {};
    for (const cls of wanted.classes) {
      const { objects, count } = await this.#current(cls, wanted);
      counts[cls.toLowerCase()] = count ?? (await this.#count(cls));
      for (const { ref, record } of objects) {
        const timestamp = (Date.now() / 1000).toFixed(3);
        events.push({ id: token, timestamp, class: cls.toLowerCase(), operation: "add", ref, snapshot: present(cls, record) });
      }
    }
    return { events, valid_ref_counts: counts, token };
  }
}

function toEvent(row: EventRow): XenValue {
  const event: Record<string, XenValue> = {
    id: String(row.id),
    timestamp: row.timestamp,
    class: row.class.toLowerCase(),
    operation: row.operation,
    ref: row.ref,
  };
  if (row.snapshot !== null) event.snapshot = present(row.class, JSON.parse(row.snapshot) as XenRecord);
  return event;
}
