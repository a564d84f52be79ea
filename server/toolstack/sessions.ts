// Users (scrypt password hashes) and sessions. A session lives while it is used: one idle longer than the
// timeout is gone. root's password comes from HANGAR_ROOT_PASSWORD, or is generated on first start and
// printed once; only its hash is kept.
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import type { Database } from "./db/database.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { newRef, xenDate } from "../xenapi/values.ts";
import { isRole, type Role } from "./rbac/roles.ts";

const scryptAsync = promisify(scrypt) as (password: string, salt: Buffer, keylen: number, options: { N: number; r: number; p: number }) => Promise<Buffer>;
const SCRYPT = { N: 16384, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
/** last_active is written at most this often per session (each call would otherwise be a write), and at least twice per timeout. */
const TOUCH_INTERVAL_MS = 30_000;

export interface Session {
  ref: string;
  uuid: string;
  userName: string;
  originator: string;
  created: string;
  lastActive: number;
  /** root, xapi's local superuser: no role limits it. */
  superuser: boolean;
  /** The highest role of the subjects that let the user in (null for root). */
  role: Role | null;
  /** The user's identifier: `local:<name>` for a local user, their DN in the directory; "" for root. */
  authUserSid: string;
  /** The refs of the subjects that let the user in: their own and their groups'. */
  subjects: string[];
}

/** Who a new session is for: everything but its ref, times and originator. */
export type Identity = Pick<Session, "userName" | "superuser" | "role" | "authUserSid" | "subjects">;

interface SessionRow {
  ref: string;
  uuid: string;
  user_name: string;
  originator: string;
  created: string;
  last_active: number;
  superuser: number;
  role: string;
  auth_user_sid: string;
  subjects: string;
}

function sessionOf(row: SessionRow, lastActive: number): Session {
  return {
    ref: row.ref,
    uuid: row.uuid,
    userName: row.user_name,
    originator: row.originator,
    created: row.created,
    lastActive,
    superuser: Number(row.superuser) === 1,
    role: isRole(row.role) ? row.role : null,
    authUserSid: row.auth_user_sid,
    subjects: JSON.parse(row.subjects) as string[],
  };
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, KEY_LENGTH, SCRYPT);
  return `scrypt$${SCRYPT.N}$${SCRYPT.r}$${SCRYPT.p}$${salt.toString("base64")}$${key.toString("base64")}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, key] = stored.split("$");
  if (scheme !== "scrypt" || salt === undefined || key === undefined) return false;
  const expected = Buffer.from(key, "base64");
  const actual = await scryptAsync(password, Buffer.from(salt, "base64"), expected.length, { N: Number(n), r: Number(r), p: Number(p) });
  return timingSafeEqual(actual, expected);
}

export class Sessions {
  readonly #db: Database;
  readonly #timeoutMs: number;

  constructor(db: Database, options: { timeoutMs: number }) {
    this.#db = db;
    this.#timeoutMs = options.timeoutMs;
  }

  /**
   * Makes sure root can log in: HANGAR_ROOT_PASSWORD (when given) is root's password; with none given and no
   * root yet, one is generated and answered so the caller can print it once.
   */
  async ensureRoot(password: string | undefined): Promise<{ generated?: string }> {
    const existing = await this.#db.get<{ password_hash: string }>("SELECT password_hash FROM users WHERE name = 'root'");
    if (password !== undefined && password !== "") {
      if (existing !== undefined && (await verifyPassword(password, existing.password_hash))) return {};
      await this.setPassword("root", password);
      return {};
    }
    if (existing !== undefined) return {};
    const generated = randomBytes(12).toString("base64url");
    await this.setPassword("root", generated);
    return { generated };
  }

  async setPassword(user: string, password: string): Promise<void> {
    const hash = await hashPassword(password);
    await this.#db.transaction(async (tx) => {
      const changed = await tx.run("UPDATE users SET password_hash = ? WHERE name = ?", [hash, user]);
      if (changed === 0) await tx.run("INSERT INTO users (name, password_hash, created) VALUES (?, ?, ?)", [user, hash, new Date().toISOString()]);
    });
  }

  /** Whether `password` is the local user's (root's or a local user's); as slow for a user that does not exist. */
  async verifyLocal(user: string, password: string): Promise<boolean> {
    const row = await this.#db.get<{ password_hash: string }>("SELECT password_hash FROM users WHERE name = ?", [user]);
    // The same work whether or not the user exists: the answer time tells nothing.
    return row === undefined ? (await hashPassword(password), false) : verifyPassword(password, row.password_hash);
  }

  async hasLocalUser(user: string): Promise<boolean> {
    return (await this.#db.get("SELECT name FROM users WHERE name = ?", [user])) !== undefined;
  }

  async removeLocalUser(user: string): Promise<void> {
    await this.#db.run("DELETE FROM users WHERE name = ?", [user]);
  }

  /** A new session for someone whose password was checked. */
  async open(identity: Identity, originator: string): Promise<Session> {
    const session: Session = { ref: newRef(), uuid: crypto.randomUUID(), originator, created: xenDate(), lastActive: Date.now(), ...identity };
    await this.#db.run("INSERT INTO sessions (ref, uuid, user_name, originator, created, last_active, superuser, role, auth_user_sid, subjects) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
      session.ref,
      session.uuid,
      session.userName,
      session.originator,
      session.created,
      session.lastActive,
      session.superuser ? 1 : 0,
      session.role ?? "",
      session.authUserSid,
      JSON.stringify(session.subjects),
    ]);
    return session;
  }

  /** The live session of a ref (its idle clock restarted), or SESSION_INVALID. */
  async check(ref: unknown): Promise<Session> {
    if (typeof ref !== "string") throw xenErrors.sessionInvalid(String(ref));
    const row = await this.#db.get<SessionRow>("SELECT * FROM sessions WHERE ref = ?", [ref]);
    const now = Date.now();
    if (row === undefined) throw xenErrors.sessionInvalid(ref);
    if (now - Number(row.last_active) > this.#timeoutMs) {
      await this.#db.run("DELETE FROM sessions WHERE ref = ?", [ref]);
      throw xenErrors.sessionInvalid(ref);
    }
    if (now - Number(row.last_active) > Math.min(TOUCH_INTERVAL_MS, this.#timeoutMs / 2)) await this.#db.run("UPDATE sessions SET last_active = ? WHERE ref = ?", [now, ref]);
    return sessionOf(row, now);
  }

  async logout(ref: string): Promise<void> {
    await this.#db.run("DELETE FROM sessions WHERE ref = ?", [ref]);
  }

  /** Every live session, root's too. */
  async all(): Promise<Session[]> {
    return (await this.#db.all<SessionRow>("SELECT * FROM sessions")).map((row) => sessionOf(row, Number(row.last_active)));
  }

  /** Ends the sessions of a user (by identifier), but `except`; answers how many. */
  async logoutUser(authUserSid: string, except?: string): Promise<number> {
    return this.#db.run("DELETE FROM sessions WHERE auth_user_sid = ? AND superuser = 0 AND ref <> ?", [authUserSid, except ?? ""]);
  }

  /** Ends every session a subject let in (it was removed, disabled, or its roles changed); answers how many. */
  async logoutSubject(subject: string): Promise<number> {
    const refs = (await this.all()).filter((session) => session.subjects.includes(subject)).map((session) => session.ref);
    for (const ref of refs) await this.logout(ref);
    return refs.length;
  }

  /** Removes sessions idle past the timeout; answers how many. */
  async expire(): Promise<number> {
    return this.#db.run("DELETE FROM sessions WHERE last_active < ?", [Date.now() - this.#timeoutMs]);
  }
}
