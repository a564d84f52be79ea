// xapi's six static roles (ocaml/idl/datamodel_roles.ml), in their strict order: each role holds every
// permission of the roles below it. A permission is the lower-cased wire name of a call (`vm.destroy`) or of an
// HTTP action (`http/put_import`); like xapi, roles and permissions are records of one `role` class, with
// uuids that are the MD5 of their names (pool-admin's is xapi's constant), so clients that know them match.
import { createHash } from "node:crypto";
import { XenApiError } from "../../xenapi/errors.ts";
import { type Role, ROLES, rolesWith } from "../../../lib/roles.ts";

export { allows, highest, isRole, type Role, ROLES, rolesWith } from "../../../lib/roles.ts";

export const ROLE_DESCRIPTIONS: Record<Role, string> = {
  "pool-admin":
    "The Pool Administrator role has full access to all features and settings, including accessing Dom0 and managing subjects, roles and external authentication",
  "pool-operator":
    "The Pool Operator role manages host- and pool-wide resources, including setting up storage, creating resource pools and managing patches, high availability (HA) and workload balancing (WLB)",
  "vm-power-admin":
    "The VM Power Administrator role has full access to VM and template management and can choose where to start VMs and use the dynamic memory control and VM snapshot features",
  "vm-admin": "The VM Administrator role can manage VMs and templates",
  "vm-operator": "The VM Operator role can use VMs and interact with VM consoles",
  "read-only": "The Read-Only role can log in with basic read-only access",
};

/** xapi's uuid of a role or permission: the MD5 of its name, printed as a uuid. */
export function nameUuid(name: string): string {
  const hex = createHash("md5").update(name).digest("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A role's or permission's ref, as xapi makes it: fixed, from its uuid. */
export function roleRef(uuid: string): string {
  return `OpaqueRef:${uuid}`;
}

/** The ref of one of the six roles (the permissions are not roles a subject can be given). */
export function roleByRef(ref: string): Role | undefined {
  return ROLES.find((role) => roleRef(nameUuid(role)) === ref);
}

export function refOfRole(role: Role): string {
  return roleRef(nameUuid(role));
}

/** The permission of a call (its sync name) or of an HTTP action (`http/put_import`). */
export function permissionOf(action: string): string {
  return action.replace(/^Async\./, "").toLowerCase();
}

export const rbacErrors = {
  /** xapi's denial: the permission, and the roles that have it. */
  denied: (permission: string, needed: Role) =>
    new XenApiError("RBAC_PERMISSION_DENIED", [permission, `No permission in user session. (Roles with this permission: ${rolesWith(needed).join(", ")})`]),
};
