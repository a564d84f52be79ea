// The minimum role of a XenAPI call, by xapi's rules (docs/research/rbac-audit.md §2): every getter is
// read-only; anything else takes its class's default, but for the calls xapi gives another role. A call of a
// class this table does not know must say its role where it is declared (Hangar's own calls do: `hangar_*`).
import type { Role } from "./roles.ts";

/** The class defaults of xapi's datamodel (`messages_default_allowed_roles`). */
const CLASS_DEFAULTS: Record<string, Role> = {
  pool: "pool-operator",
  host: "pool-operator",
  SR: "pool-operator",
  PBD: "pool-operator",
  VDI: "vm-admin",
  VBD: "vm-admin",
  VIF: "vm-admin",
  VM: "vm-admin",
  network: "vm-admin",
  // A user's own tasks are theirs to change (the task calls check who owns one); anyone may make one.
  task: "read-only",
  event: "read-only",
  role: "read-only",
  subject: "pool-admin",
  session: "pool-admin",
};

/** The calls xapi gives another role than their class's. */
const EXCEPTIONS: Record<string, Role> = {
  "SR.scan": "vm-power-admin",
  "VDI.list_changed_blocks": "vm-operator",
  "VM.set_memory": "vm-power-admin",
  "VM.set_memory_limits": "vm-power-admin",
  "VM.set_memory_static_max": "vm-power-admin",
  "VM.set_memory_static_min": "vm-power-admin",
  "VM.set_memory_dynamic_max": "vm-power-admin",
  "VM.set_memory_dynamic_min": "vm-power-admin",
  // network: made and destroyed by VM admins, named and configured by pool operators.
  "network.set_name_label": "pool-operator",
  "network.set_name_description": "pool-operator",
  "network.set_other_config": "pool-operator",
  "network.add_to_other_config": "pool-operator",
  "network.remove_from_other_config": "pool-operator",
  "session.logout": "read-only",
  // Hangar lets a user change their own password (xapi: root only); whose it is, the call checks.
  "session.change_password": "read-only",
  "session.get_all_subject_identifiers": "read-only",
  "session.logout_subject_identifier": "pool-operator",
  "pool.enable_external_auth": "pool-admin",
  "pool.disable_external_auth": "pool-admin",
};

/** The role a call needs, or undefined when the rules do not say (the call must declare it). */
export function ruledRole(name: string): Role | undefined {
  const [cls = "", message = ""] = name.split(".");
  if (message.startsWith("get_") || message === "get") return "read-only";
  if (message.startsWith("hangar_")) return undefined;
  return EXCEPTIONS[name] ?? CLASS_DEFAULTS[cls];
}
