// The HTTP resources and the role each needs, by xapi's http_actions (datamodel.ml) where xapi has the action:
// the permission is `http/<action>`. Hangar's own services by analogy: its plugins' read calls and datasources
// are reading (as xapi's RRD handlers are read-only); any other plugin call changes storage behind every
// XenAPI check, so it is the pool administrator's (as xapi's /services is).
import type { Role } from "./roles.ts";

export interface HttpAction {
  path: string;
  method: string;
  permission: string;
  role: Role;
  /** Whether the audit trail records it: a disk or a VM going in or out does; reading the trail itself does not. */
  audited: boolean;
}

const action = (method: string, path: string, name: string, role: Role, audited = true): HttpAction => ({ path, method, permission: `http/${name}`, role, audited });

export const HTTP_ACTIONS: readonly HttpAction[] = [
  action("PUT", "/import", "put_import", "vm-admin"),
  action("PUT", "/import_metadata", "put_import_metadata", "vm-admin"),
  action("PUT", "/import_raw_vdi", "put_import_raw_vdi", "vm-admin"),
  action("GET", "/export", "get_export", "vm-admin"),
  action("GET", "/export_metadata", "get_export_metadata", "vm-admin"),
  action("GET", "/export_raw_vdi", "get_export_raw_vdi", "vm-admin"),
  action("GET", "/audit_log", "get_audit_log", "read-only", false),
  action("GET", "/metrics", "get_metrics", "read-only", false),
  action("GET", "/plugins", "get_plugins", "read-only", false),
  action("POST", "/plugins", "post_plugins/read", "read-only", false),
  action("POST", "/plugins", "post_plugins/write", "pool-admin"),
];

/** The storage calls a plugin relay may make for a reader: they change nothing. */
export const READING_PLUGIN_CALLS = new Set(["Plugin.query", "Plugin.ls", "Plugin.diagnostics", "Data.stat", "Data.ls", "SR.probe", "SR.stat", "SR.ls", "Volume.stat", "Volume.compare", "Volume.similar_content", "Volume.list_changed_blocks"]);

/** The action of a request (HEAD as GET), or undefined for a path no action covers. */
export function httpAction(method: string, path: string, write = false): HttpAction | undefined {
  const verb = method === "HEAD" ? "GET" : method;
  const base = path.startsWith("/metrics/") ? "/metrics" : path.startsWith("/plugins/") ? "/plugins" : path.replace(/\/$/, "");
  const matches = HTTP_ACTIONS.filter((a) => a.path === base && a.method === verb);
  return matches.length > 1 ? matches[write ? 1 : 0] : matches[0];
}
