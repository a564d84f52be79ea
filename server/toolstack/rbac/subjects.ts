// subject.*: who may log in, and with which roles. A subject is a local user (`local:<name>`, their password's
// scrypt hash kept apart, never answered) or a user or group of the directory (its DN); a user's roles are the
// union of those of their own subject and of every group they are in, computed at login (login.ts). A subject
// removed, disabled, or given other roles loses the sessions it let in at once.
import { z } from "zod";
import { objectGetters } from "../calls/getters.ts";
import { method } from "../methods.ts";
import type { StoredObject } from "../objects.ts";
import type { Toolstack } from "../toolstack.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { XenRecord } from "../../xenapi/values.ts";
import { lookup, normalizeDn } from "./directory.ts";
import { currentDirectory, directoryFailure, authErrors } from "./external-auth.ts";
import { permissionNames } from "./role-calls.ts";
import { highest, type Role, roleByRef } from "./roles.ts";

export const LOCAL_PREFIX = "local:";
/** A local user's name: letters, digits and `._-`, as login names usually are. */
const LOCAL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
export const MIN_PASSWORD = 8;
const MAX_PASSWORD = 1024;

export const subjectErrors = {
  alreadyExists: () => new XenApiError("SUBJECT_ALREADY_EXISTS"),
  cannotBeResolved: () => new XenApiError("SUBJECT_CANNOT_BE_RESOLVED"),
  roleNotFound: () => new XenApiError("ROLE_NOT_FOUND"),
  roleAlreadyExists: () => new XenApiError("ROLE_ALREADY_EXISTS"),
  notLocal: (subject: string) => new XenApiError("INVALID_VALUE", ["subject", `${subject} is not a local user: directory users change their password in the directory`]),
  weakPassword: () => new XenApiError("CHANGE_PASSWORD_REJECTED", [`a password needs at least ${MIN_PASSWORD} characters (and at most ${MAX_PASSWORD})`]),
  lastPoolAdmin: (name: string) =>
    new XenApiError("OPERATION_NOT_ALLOWED", [`${name} is the last user or group holding pool-admin: give the role to another one first (root, the local superuser, is not counted)`]),
};

/**
 * Refuses to remove, disable or demote the last enabled subject holding pool-admin: a pool run by its directory's
 * administrators would be left to root alone.
 */
async function keepPoolAdmin(ts: Toolstack, ref: string): Promise<void> {
  const admins = (await ts.objects.all("subject")).filter((s) => !isDisabled(s.record) && subjectRoles(s.record).includes("pool-admin"));
  if (admins.length === 1 && admins[0]!.ref === ref) throw subjectErrors.lastPoolAdmin(subjectName(admins[0]!.record));
}

export function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw subjectErrors.weakPassword();
}

export function subjectName(record: XenRecord): string {
  return String((record.other_config as Record<string, string> | undefined)?.["subject-name"] ?? record.subject_identifier);
}

export function isDisabled(record: XenRecord): boolean {
  return (record.other_config as Record<string, string> | undefined)?.["subject-account-disabled"] === "true";
}

/** The roles a subject holds. */
export function subjectRoles(record: XenRecord): Role[] {
  return ((record.roles as string[] | undefined) ?? []).flatMap((ref) => roleByRef(ref) ?? []);
}

/** The subjects whose identifiers are among `identifiers` (DNs compared as the directory does). */
export async function subjectsFor(ts: Toolstack, identifiers: readonly string[]): Promise<StoredObject[]> {
  const wanted = new Set(identifiers.map(normalizeDn));
  return (await ts.objects.all("subject")).filter((s) => wanted.has(normalizeDn(String(s.record.subject_identifier))));
}

async function subjectByIdentifier(ts: Toolstack, identifier: string): Promise<StoredObject | undefined> {
  return (await subjectsFor(ts, [identifier]))[0];
}

function localName(subject: StoredObject): string {
  const identifier = String(subject.record.subject_identifier);
  if (!identifier.startsWith(LOCAL_PREFIX)) throw subjectErrors.notLocal(subject.ref);
  return identifier.slice(LOCAL_PREFIX.length);
}

/** Changes a subject's roles; the sessions it let in end (they hold the old roles). */
async function changeRoles(ts: Toolstack, ref: string, change: (roles: string[]) => string[]): Promise<void> {
  await ts.objects.update("subject", ref, (record) => ({ ...record, roles: change([...((record.roles as string[]) ?? [])]) }));
  await ts.sessions.logoutSubject(ref);
}

function record(identifier: string, name: string, source: "local" | "ldap", isGroup: boolean): XenRecord {
  return {
    uuid: crypto.randomUUID(),
    name_label: name,
    subject_identifier: identifier,
    other_config: { "subject-name": name, "subject-is-group": String(isGroup), "subject-account-disabled": "false", "hangar-source": source },
    roles: [],
  };
}

const zSubjectRecord = z.looseObject({ subject_identifier: z.string().min(1).max(1024) });
const FIELDS = ["uuid", "subject_identifier", "other_config", "roles"];

export const subjectCalls = [
  ...objectGetters("subject", FIELDS),
  // A user or group of the directory, by DN; its name and kind come from the directory (as in xapi, what the
  // caller says of them is not taken). No roles yet: a pool administrator gives them.
  method("subject.create", [["args", zSubjectRecord]], async ({ ts }, args) => {
    const identifier = args.subject_identifier;
    if (identifier.startsWith(LOCAL_PREFIX)) throw new XenApiError("INVALID_VALUE", ["subject_identifier", "local users are made with subject.hangar_create_local"]);
    const config = await currentDirectory(ts);
    if (config === undefined) throw authErrors.disabled();
    if ((await subjectByIdentifier(ts, identifier)) !== undefined) throw subjectErrors.alreadyExists();
    const entry = await lookup(config, identifier).catch((error: unknown) => {
      throw directoryFailure(error);
    });
    if (entry === undefined) throw subjectErrors.cannotBeResolved();
    return (await ts.objects.create("subject", record(entry.dn, entry.name, "ldap", entry.isGroup))).ref;
  }),
  method("subject.destroy", [["self", zRef]], async ({ ts }, ref) => {
    const subject = await ts.objects.get("subject", ref);
    await keepPoolAdmin(ts, ref);
    const identifier = String(subject.record.subject_identifier);
    await ts.objects.destroy("subject", ref);
    if (identifier.startsWith(LOCAL_PREFIX)) await ts.sessions.removeLocalUser(localName(subject));
    await ts.sessions.logoutSubject(ref);
  }),
  method("subject.add_to_roles", [["self", zRef], ["role", zRef]], async ({ ts }, ref, role) => {
    if (roleByRef(role) === undefined) throw subjectErrors.roleNotFound();
    if (((await ts.objects.get("subject", ref)).record.roles as string[]).includes(role)) throw subjectErrors.roleAlreadyExists();
    await changeRoles(ts, ref, (roles) => [...roles, role]);
  }),
  method("subject.remove_from_roles", [["self", zRef], ["role", zRef]], async ({ ts }, ref, role) => {
    if (!((await ts.objects.get("subject", ref)).record.roles as string[]).includes(role)) throw subjectErrors.roleNotFound();
    if (roleByRef(role) === "pool-admin") await keepPoolAdmin(ts, ref);
    await changeRoles(ts, ref, (roles) => roles.filter((r) => r !== role));
  }),
  method("subject.get_permissions_name_label", [["self", zRef]], async ({ ts }, ref) => {
    const role = highest(subjectRoles((await ts.objects.get("subject", ref)).record));
    return role === undefined ? [] : permissionNames(ts.methods, role);
  }),
  // Hangar's: a local user (xapi has only root), with no roles until given some.
  method(
    "subject.hangar_create_local",
    [["name", zString], ["password", zString]],
    async ({ ts }, name, password) => {
      if (!LOCAL_NAME.test(name) || name === "root") throw new XenApiError("INVALID_VALUE", ["name", `${name}: a local user's name is 1 to 64 letters, digits, '.', '_' or '-', and not root`]);
      checkPassword(password);
      if ((await ts.sessions.hasLocalUser(name)) || (await subjectByIdentifier(ts, `${LOCAL_PREFIX}${name}`)) !== undefined) throw subjectErrors.alreadyExists();
      await ts.sessions.setPassword(name, password);
      return (await ts.objects.create("subject", record(`${LOCAL_PREFIX}${name}`, name, "local", false))).ref;
    },
    { role: "pool-admin" },
  ),
  // Hangar's: a pool administrator resets a local user's password; the user's sessions end.
  method(
    "subject.hangar_set_password",
    [["self", zRef], ["password", zString]],
    async ({ ts }, ref, password) => {
      const name = localName(await ts.objects.get("subject", ref));
      checkPassword(password);
      await ts.sessions.setPassword(name, password);
      await ts.sessions.logoutSubject(ref);
    },
    { role: "pool-admin" },
  ),
  // Hangar's: a disabled subject lets nobody in, and its sessions end at once.
  method(
    "subject.hangar_set_disabled",
    [["self", zRef], ["value", z.boolean()]],
    async ({ ts }, ref, disabled) => {
      if (disabled) await keepPoolAdmin(ts, ref);
      await ts.objects.update("subject", ref, (r) => ({ ...r, other_config: { ...(r.other_config as Record<string, string>), "subject-account-disabled": String(disabled) } }));
      if (disabled) await ts.sessions.logoutSubject(ref);
    },
    { role: "pool-admin" },
  ),
];
