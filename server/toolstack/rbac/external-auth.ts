// The pool's external authentication: an LDAP directory (directory.ts), set for every host at once as xapi's
// pool.enable_external_auth does. Its settings live in one row (the bind password with them, which no call
// answers); each host's record shows the type, the service name and the settings without the password.
import { z } from "zod";
import { method } from "../methods.ts";
import type { Toolstack } from "../toolstack.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { DirectoryError, type LdapConfig, publicConfig, testDirectory, ZLdapConfig } from "./directory.ts";

export const AUTH_TYPE = "LDAP";
const zConfig = z.record(z.string(), z.string());

export const authErrors = {
  disabled: () => new XenApiError("AUTH_IS_DISABLED"),
  alreadyEnabled: (type: string, service: string) => new XenApiError("AUTH_ALREADY_ENABLED", [type, service]),
  unknownType: (type: string) => new XenApiError("AUTH_UNKNOWN_TYPE", [type]),
  enableFailed: (message: string) => new XenApiError("AUTH_ENABLE_FAILED", [message]),
  serviceError: (message: string) => new XenApiError("AUTH_SERVICE_ERROR", [message]),
};

/** The settings, checked: AUTH_ENABLE_FAILED naming what is wrong. */
export function ldapConfig(config: Record<string, string>): LdapConfig {
  const parsed = ZLdapConfig.safeParse(config);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  throw authErrors.enableFailed(`the setting ${issue.path.join(".") || "(config)"} is not right: ${issue.message}`);
}

/** The directory in use, or undefined when external authentication is off. */
export async function currentDirectory(ts: Toolstack): Promise<LdapConfig | undefined> {
  const row = await ts.db.get<{ config: string }>("SELECT config FROM external_auth WHERE id = 1");
  return row === undefined ? undefined : ldapConfig(JSON.parse(row.config) as Record<string, string>);
}

/** A directory failure in XenAPI's words. */
export function directoryFailure(error: unknown): XenApiError {
  if (error instanceof XenApiError) return error;
  return authErrors.serviceError(error instanceof DirectoryError ? error.message : `the directory failed: ${(error as Error).message}`);
}

async function showOnHosts(ts: Toolstack, type: string, service: string, config: Record<string, string>): Promise<void> {
  for (const host of await ts.objects.all("host")) await ts.objects.set("host", host.ref, { external_auth_type: type, external_auth_service_name: service, external_auth_configuration: config });
}

export const externalAuthCalls = [
  method("pool.enable_external_auth", [["self", zRef], ["config", zConfig], ["service_name", zString], ["auth_type", zString]], async ({ ts }, _pool, config, service, type) => {
    if (type !== AUTH_TYPE) throw authErrors.unknownType(type);
    const existing = await ts.db.get<{ type: string; service_name: string }>("SELECT type, service_name FROM external_auth WHERE id = 1");
    if (existing !== undefined) throw authErrors.alreadyEnabled(existing.type, existing.service_name);
    const checked = ldapConfig(config);
    // Settings that cannot reach the directory are refused, not saved.
    await testDirectory(checked).catch((error: unknown) => {
      throw authErrors.enableFailed(error instanceof DirectoryError ? error.message : (error as Error).message);
    });
    await ts.db.run("INSERT INTO external_auth (id, type, service_name, config) VALUES (1, ?, ?, ?)", [type, service, JSON.stringify(config)]);
    await showOnHosts(ts, type, service, publicConfig(config));
  }, { async: false }),
  method("pool.disable_external_auth", [["self", zRef], ["config", zConfig]], async ({ ts }) => {
    await ts.db.run("DELETE FROM external_auth WHERE id = 1");
    await showOnHosts(ts, "", "", {});
    // The directory's users are out at once (xapi revalidates them away).
    for (const session of await ts.sessions.all()) if (!session.superuser && !session.authUserSid.startsWith("local:")) await ts.sessions.logout(session.ref);
  }, { async: false, optional: 1 }),
  // Hangar's: the settings page's "test connection", without saving anything.
  method("pool.hangar_test_external_auth", [["self", zRef], ["config", zConfig]], async (_ctx, _pool, config) => {
    try {
      return await testDirectory(ldapConfig(config));
    } catch (error) {
      throw error instanceof XenApiError ? error : authErrors.enableFailed(error instanceof DirectoryError ? error.message : (error as Error).message);
    }
  }, { role: "pool-admin", async: false }),
];
