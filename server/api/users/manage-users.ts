// The Users page's verbs, each one toolstack call or a few (the toolstack judges who may).
import "server-only";

import { z } from "zod";
import { ROLES, type Role } from "../../../lib/roles.ts";
import type { ConsoleSession } from "../../auth/session.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import type { ZDirectorySettingsSchema } from "./schema.ts";

const zRef = z.string();
const ZSubjectRecord = z.looseObject({ subject_identifier: z.string(), other_config: z.record(z.string(), z.string()), roles: z.array(z.string()) });
const ZRoleRecord = z.looseObject({ name_label: z.string(), is_internal: z.boolean() });
const ZHost = z.looseObject({ external_auth_type: z.string().optional(), external_auth_service_name: z.string().optional(), external_auth_configuration: z.record(z.string(), z.string()).optional() });

/** The six roles' refs by name (role.get_by_name_label: the toolstack's own). */
async function roleRefs(xapi: XenApiClient): Promise<Map<Role, string>> {
  const records = await xapi.call(z.record(z.string(), ZRoleRecord), "role.get_all_records");
  return new Map(Object.entries(records).flatMap(([ref, record]) => (!record.is_internal && (ROLES as readonly string[]).includes(record.name_label) ? [[record.name_label as Role, ref] as const] : [])));
}

export async function listUsers(xapi: XenApiClient, session: ConsoleSession) {
  const [subjects, roles, hosts, identifiers, self] = await Promise.all([
    xapi.call(z.record(z.string(), ZSubjectRecord), "subject.get_all_records"),
    roleRefs(xapi),
    xapi.call(z.record(z.string(), ZHost), "host.get_all_records"),
    xapi.call(z.array(z.string()), "session.get_all_subject_identifiers").catch(() => [] as string[]),
    xapi.call(z.looseObject({ auth_user_sid: z.string() }), "session.get_record", session.session),
  ]);
  const names = new Map([...roles].map(([name, ref]) => [ref, name]));
  const host = Object.values(hosts)[0];
  return {
    subjects: Object.entries(subjects)
      .map(([ref, s]) => {
        const held = s.roles.flatMap((r) => names.get(r) ?? []);
        return {
          ref,
          name: s.other_config["subject-name"] ?? s.subject_identifier,
          identifier: s.subject_identifier,
          source: s.subject_identifier.startsWith("local:") ? ("local" as const) : ("ldap" as const),
          isGroup: s.other_config["subject-is-group"] === "true",
          disabled: s.other_config["subject-account-disabled"] === "true",
          role: ROLES.find((role) => held.includes(role)) ?? null,
          sessions: identifiers.filter((id) => id.toLowerCase() === s.subject_identifier.toLowerCase()).length,
        };
      })
      .sort((a, b) => a.name.localeCompare(b.name)),
    directory: { enabled: (host?.external_auth_type ?? "") !== "", serviceName: host?.external_auth_service_name ?? "", config: host?.external_auth_configuration ?? {} },
    // Root and local users change their password here; a directory user's is the directory's.
    you: { name: session.user, local: session.superuser || self.auth_user_sid.startsWith("local:") },
  };
}

/** Gives a subject exactly `role` (or none): what it held before goes. */
export async function setRole(xapi: XenApiClient, subject: string, role: Role | null): Promise<void> {
  const refs = await roleRefs(xapi);
  const current = (await xapi.call(ZSubjectRecord, "subject.get_record", subject)).roles;
  const wanted = role === null ? undefined : refs.get(role);
  for (const ref of current) if (ref !== wanted) await xapi.call(z.unknown(), "subject.remove_from_roles", subject, ref);
  if (wanted !== undefined && !current.includes(wanted)) await xapi.call(z.unknown(), "subject.add_to_roles", subject, wanted);
}

export async function createLocalUser(xapi: XenApiClient, input: { name: string; password: string; role: Role }): Promise<string> {
  const subject = await xapi.call(zRef, "subject.hangar_create_local", input.name, input.password);
  await setRole(xapi, subject, input.role);
  return subject;
}

export async function addDirectorySubject(xapi: XenApiClient, input: { dn: string; role: Role }): Promise<string> {
  const subject = await xapi.call(zRef, "subject.create", { subject_identifier: input.dn });
  await setRole(xapi, subject, input.role);
  return subject;
}

/** The page's form as the toolstack's settings (pool.enable_external_auth's config map). */
export function directoryConfig(input: z.infer<typeof ZDirectorySettingsSchema>): Record<string, string> {
  const config: Record<string, string> = {
    url: input.url,
    starttls: String(input.starttls),
    bind_dn: input.bindDn,
    bind_password: input.bindPassword,
    user_base: input.userBase,
  };
  if (input.caCert.trim() !== "") config.ca_cert = input.caCert;
  if (input.userFilter !== "") config.user_filter = input.userFilter;
  if (input.userNameAttribute !== "") config.user_name_attribute = input.userNameAttribute;
  if (input.groupBase !== "") config.group_base = input.groupBase;
  if (input.groupFilter !== "") config.group_filter = input.groupFilter;
  return config;
}

export async function thePool(xapi: XenApiClient): Promise<string> {
  const [pool] = await xapi.call(z.array(z.string()), "pool.get_all");
  return pool!;
}
