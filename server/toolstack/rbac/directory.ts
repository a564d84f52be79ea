// An LDAP directory as the pool's external authentication (pool.enable_external_auth with auth_type "LDAP"):
// a user is found by a search made as the service account, their password checked by binding as the entry
// found (on a connection of its own), and their groups walked upwards through `member` / `uniqueMember`, nested
// ones too, to a bounded depth. TLS always unless the settings say `starttls=false` for an ldap:// URL: ldaps://
// from the first byte, or StartTLS before any bind; certificates are verified (against `ca_cert` when given).
// Every value put in a filter is escaped (RFC 4515); a DN is only ever one the directory answered or an
// administrator gave.
import { isIP } from "node:net";
import { Client, EqualityFilter, InvalidCredentialsError, NoSuchObjectError } from "ldapts";
import { z } from "zod";

export const LDAP_CONFIG_KEYS = ["url", "starttls", "ca_cert", "bind_dn", "bind_password", "user_base", "user_filter", "user_name_attribute", "group_base", "group_filter"] as const;

export const ZLdapConfig = z.object({
  url: z
    .string()
    .regex(/^ldaps?:\/\/[^/\s]+\/?$/i, "an ldap:// or ldaps:// URL of the server (host and port, nothing after)")
    .max(512),
  starttls: z
    .enum(["true", "false"])
    .default("true")
    .transform((v) => v === "true"),
  ca_cert: z.string().max(64 * 1024).optional(),
  bind_dn: z.string().min(1, "the service account's DN").max(1024),
  bind_password: z.string().min(1, "the service account's password").max(1024),
  user_base: z.string().min(1, "where users are searched (a DN)").max(1024),
  user_filter: z.string().max(1024).default("(objectClass=person)"),
  user_name_attribute: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9-]*$/)
    .default("uid"),
  group_base: z.string().max(1024).optional(),
  group_filter: z.string().max(1024).default("(|(objectClass=groupOfNames)(objectClass=groupOfUniqueNames))"),
});
export type LdapConfig = z.output<typeof ZLdapConfig>;

/** The configuration as the host records show it: everything but the bind password. */
export function publicConfig(config: Record<string, string>): Record<string, string> {
  const { bind_password: _secret, ...rest } = config;
  return rest;
}

/** A user or group found in the directory. */
export interface DirectoryEntry {
  dn: string;
  name: string;
  isGroup: boolean;
}

/** A user whose password the directory accepted, with every group they are in (nested ones too). */
export interface DirectoryUser extends DirectoryEntry {
  groups: string[];
}

/** The directory cannot be used (unreachable, TLS, the service account refused): not the user's fault. */
export class DirectoryError extends Error {}

const TIMEOUT_MS = 10_000;
/** Nested groups are followed this deep, and this many at most. */
const MAX_GROUP_DEPTH = 8;
const MAX_GROUPS = 1000;

/** A DN compared as LDAP compares them here: case and spaces around separators do not count. */
export function normalizeDn(dn: string): string {
  return dn.trim().replace(/\s*([,=+])\s*/g, "$1").toLowerCase();
}

function first(value: unknown): string {
  const one = Array.isArray(value) ? value[0] : value;
  return one === undefined ? "" : Buffer.isBuffer(one) ? one.toString("utf8") : String(one);
}

function all(value: unknown): string[] {
  return (Array.isArray(value) ? value : value === undefined ? [] : [value]).map((v) => (Buffer.isBuffer(v) ? v.toString("utf8") : String(v)));
}

/** A connected, secured client (not yet bound). */
async function connect(config: LdapConfig): Promise<Client> {
  // The certificate is checked against the URL's host: a name by SNI, an address (which SNI cannot carry) as is.
  const host = new URL(config.url).hostname.replace(/^\[(.*)\]$/, "$1");
  const tlsOptions = { ...(config.ca_cert === undefined ? {} : { ca: config.ca_cert }), host, ...(isIP(host) === 0 ? { servername: host } : {}) };
  const secure = config.url.toLowerCase().startsWith("ldaps://");
  // TLS options go to the constructor for ldaps:// only: given for ldap://, they broke the StartTLS that follows.
  const client = new Client({ url: config.url.replace(/\/$/, ""), timeout: TIMEOUT_MS, connectTimeout: TIMEOUT_MS, ...(secure ? { tlsOptions } : {}) });
  try {
    if (!secure && config.starttls) await client.startTLS(tlsOptions);
    return client;
  } catch (error) {
    await client.unbind().catch(() => undefined);
    throw new DirectoryError(`cannot reach the directory at ${config.url} securely: ${(error as Error).message}`);
  }
}

/** Runs `work` on a client bound as the service account. */
async function asService<T>(config: LdapConfig, work: (client: Client) => Promise<T>): Promise<T> {
  const client = await connect(config);
  try {
    try {
      await client.bind(config.bind_dn, config.bind_password);
    } catch (error) {
      throw new DirectoryError(`the directory refused the service account ${config.bind_dn}: ${(error as Error).message}`);
    }
    return await work(client);
  } finally {
    await client.unbind().catch(() => undefined);
  }
}

function isGroupEntry(objectClasses: string[]): boolean {
  return objectClasses.some((c) => /^(groupOfNames|groupOfUniqueNames|posixGroup|group)$/i.test(c));
}

/** The groups `dn` is a member of, and theirs, breadth first, bounded. */
async function groupsOf(client: Client, config: LdapConfig, dn: string): Promise<string[]> {
  if (config.group_base === undefined) return [];
  const seen = new Map<string, string>();
  let level = [dn];
  for (let depth = 0; depth < MAX_GROUP_DEPTH && level.length > 0 && seen.size < MAX_GROUPS; depth++) {
    const next: string[] = [];
    for (const member of level) {
      const filter = `(&${config.group_filter}(|${new EqualityFilter({ attribute: "member", value: member }).toString()}${new EqualityFilter({ attribute: "uniqueMember", value: member }).toString()}))`;
      const { searchEntries } = await client.search(config.group_base, { scope: "sub", filter, attributes: ["1.1"], sizeLimit: MAX_GROUPS });
      for (const entry of searchEntries) {
        const key = normalizeDn(entry.dn);
        if (seen.has(key) || seen.size >= MAX_GROUPS) continue;
        seen.set(key, entry.dn);
        next.push(entry.dn);
      }
    }
    level = next;
  }
  return [...seen.values()];
}

/**
 * Checks `password` for `name`: the user's entry, found as the service account, must be one, and accept a bind
 * with that password. Undefined when the name or password is wrong (never which of them).
 */
export async function authenticate(config: LdapConfig, name: string, password: string): Promise<DirectoryUser | undefined> {
  // An empty password would be an unauthenticated bind, which directories accept (RFC 4513 §5.1.2).
  if (name === "" || password === "") return undefined;
  const found = await asService(config, async (client) => {
    const filter = `(&${config.user_filter}${new EqualityFilter({ attribute: config.user_name_attribute, value: name }).toString()})`;
    const { searchEntries } = await client.search(config.user_base, { scope: "sub", filter, attributes: ["cn", "displayName", config.user_name_attribute], sizeLimit: 2 }).catch((error: unknown) => {
      if (error instanceof NoSuchObjectError) throw new DirectoryError(`the users' base ${config.user_base} does not exist in the directory`);
      throw error;
    });
    if (searchEntries.length !== 1) return undefined;
    const entry = searchEntries[0]!;
    return { dn: entry.dn, name: first(entry[config.user_name_attribute]) || name, groups: await groupsOf(client, config, entry.dn) };
  });
  if (found === undefined) return undefined;
  const client = await connect(config);
  try {
    await client.bind(found.dn, password);
  } catch (error) {
    if (error instanceof InvalidCredentialsError) return undefined;
    throw new DirectoryError(`the directory failed the login of ${found.dn}: ${(error as Error).message}`);
  } finally {
    await client.unbind().catch(() => undefined);
  }
  return { ...found, isGroup: false };
}

/** The entry at `dn` (a user or a group), or undefined when the directory has none. */
export async function lookup(config: LdapConfig, dn: string): Promise<DirectoryEntry | undefined> {
  return asService(config, async (client) => {
    try {
      const { searchEntries } = await client.search(dn, { scope: "base", filter: "(objectClass=*)", attributes: ["objectClass", "cn", config.user_name_attribute] });
      const entry = searchEntries[0];
      if (entry === undefined) return undefined;
      const isGroup = isGroupEntry(all(entry.objectClass));
      return { dn: entry.dn, name: (isGroup ? first(entry.cn) : first(entry[config.user_name_attribute]) || first(entry.cn)) || entry.dn, isGroup };
    } catch (error) {
      if (error instanceof NoSuchObjectError) return undefined;
      throw error;
    }
  });
}

/** A connection test as the settings page runs it: secured, bound, both bases found; a summary in words. */
export async function testDirectory(config: LdapConfig): Promise<string> {
  return asService(config, async (client) => {
    const count = async (base: string, filter: string) => {
      try {
        const { searchEntries } = await client.search(base, { scope: "sub", filter, attributes: ["1.1"], sizeLimit: 1000 });
        return searchEntries.length;
      } catch (error) {
        if (error instanceof NoSuchObjectError) throw new DirectoryError(`${base} does not exist in the directory`);
        throw error;
      }
    };
    const users = await count(config.user_base, config.user_filter);
    const groups = config.group_base === undefined ? undefined : await count(config.group_base, config.group_filter);
    const secured = config.url.toLowerCase().startsWith("ldaps://") ? "TLS" : config.starttls ? "StartTLS" : "no TLS";
    return `Connected to ${config.url} (${secured}) as ${config.bind_dn}: ${users} user${users === 1 ? "" : "s"} under ${config.user_base}${groups === undefined ? "" : `, ${groups} group${groups === 1 ? "" : "s"} under ${config.group_base}`}.`;
  });
}
