// What the users router takes and returns: subjects (local users, directory users and groups) with their role,
// and the directory's settings (never its bind password).
import { z } from "zod";
import { ROLES } from "../../../lib/roles.ts";

const zRole = z.enum(ROLES);
const zRef = z.string().startsWith("OpaqueRef:").max(128);
const zPassword = z.string().min(8, "A password needs at least 8 characters.").max(1024);

export const ZSubject = z.object({
  ref: z.string(),
  name: z.string(),
  identifier: z.string(),
  source: z.enum(["local", "ldap"]),
  isGroup: z.boolean(),
  disabled: z.boolean(),
  /** The highest of its roles (a subject given several holds the highest); null: none yet. */
  role: zRole.nullable(),
  /** Sessions it let in now. */
  sessions: z.number(),
});

export const ZDirectory = z.object({
  enabled: z.boolean(),
  serviceName: z.string(),
  /** The settings in use, without the bind password. */
  config: z.record(z.string(), z.string()),
});

export const ZListUsersResponse = z.object({ subjects: z.array(ZSubject), directory: ZDirectory, you: z.object({ name: z.string(), local: z.boolean() }) });

export const ZCreateLocalUserSchema = z.object({
  name: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "A name is 1 to 64 letters, digits, '.', '_' or '-'."),
  password: zPassword,
  role: zRole,
});
export const ZAddDirectorySubjectSchema = z.object({ dn: z.string().trim().min(3, "Enter the DN of a user or group.").max(1024), role: zRole });
export const ZSubjectRefSchema = z.object({ subject: zRef });
export const ZSetRoleSchema = z.object({ subject: zRef, role: zRole.nullable() });
export const ZResetPasswordSchema = z.object({ subject: zRef, password: zPassword });
export const ZSetDisabledSchema = z.object({ subject: zRef, disabled: z.boolean() });
export const ZChangeOwnPasswordSchema = z.object({ old: z.string().min(1).max(1024), new: zPassword });

export const ZDirectorySettingsSchema = z.object({
  serviceName: z.string().trim().min(1, "Name the directory (e.g. its domain).").max(256),
  url: z
    .string()
    .trim()
    .regex(/^ldaps?:\/\/[^/\s]+\/?$/i, "An ldap:// or ldaps:// URL: host and port, nothing after."),
  starttls: z.boolean(),
  caCert: z.string().max(64 * 1024),
  bindDn: z.string().trim().min(1, "The service account's DN.").max(1024),
  bindPassword: z.string().min(1, "The service account's password.").max(1024),
  userBase: z.string().trim().min(1, "Where users are (a DN).").max(1024),
  userFilter: z.string().trim().max(1024),
  userNameAttribute: z.string().trim().max(64),
  groupBase: z.string().trim().max(1024),
  groupFilter: z.string().trim().max(1024),
});

export const ZMessageResponse = z.object({ message: z.string() });
export const ZOkResponse = z.object({ ok: z.literal(true) });

export type TSubject = z.infer<typeof ZSubject>;
export type TListUsersResponse = z.infer<typeof ZListUsersResponse>;
export type TDirectorySettings = z.infer<typeof ZDirectorySettingsSchema>;
