// role.*: the six roles and the permissions they hold, read-only and static as xapi serves them (xapi_role.ml):
// a permission is a record of the same class, named by the lower-cased wire name of a call or HTTP action,
// whose roles are those at least as high as the role it needs.
import { method, type MethodDef, type MethodTable } from "../methods.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { xenErrors } from "../../xenapi/errors.ts";
import type { XenRecord } from "../../xenapi/values.ts";
import { HTTP_ACTIONS } from "./http-actions.ts";
import { allows, nameUuid, permissionOf, type Role, ROLE_DESCRIPTIONS, roleRef, ROLES } from "./roles.ts";

interface RoleEntry {
  ref: string;
  record: XenRecord;
  /** The role a permission needs; for a role, the role itself. */
  needs: Role;
  isRole: boolean;
}

const built = new WeakMap<MethodTable, RoleEntry[]>();

/** Every permission of the call table and the HTTP actions, then the roles (xapi lists them in that order). */
export function roleEntries(methods: MethodTable): RoleEntry[] {
  let entries = built.get(methods);
  if (entries === undefined) built.set(methods, (entries = buildEntries(methods)));
  return entries;
}

function buildEntries(methods: MethodTable): RoleEntry[] {
  const needs = new Map<string, { wire: string; role: Role }>();
  for (const def of methods.all()) if (def.role !== null) needs.set(permissionOf(def.name), { wire: def.name, role: def.role });
  for (const action of HTTP_ACTIONS) needs.set(action.permission, { wire: action.permission, role: action.role });
  const permissions = [...needs].map(([name, { wire, role }]): RoleEntry => {
    const uuid = nameUuid(wire);
    return { ref: roleRef(uuid), needs: role, isRole: false, record: { uuid, name_label: name, name_description: "A basic permission", subroles: [], is_internal: true } };
  });
  const roles = ROLES.map((role): RoleEntry => {
    const uuid = nameUuid(role);
    const subroles = permissions.filter((p) => allows(role, p.needs)).map((p) => p.ref);
    return { ref: roleRef(uuid), needs: role, isRole: true, record: { uuid, name_label: role, name_description: ROLE_DESCRIPTIONS[role], subroles, is_internal: false } };
  });
  return [...permissions, ...roles];
}

/** The permission names a role holds (its own leaves), sorted. */
export function permissionNames(methods: MethodTable, role: Role): string[] {
  return roleEntries(methods)
    .filter((entry) => !entry.isRole && allows(role, entry.needs))
    .map((entry) => String(entry.record.name_label))
    .sort();
}

function entry(methods: MethodTable, ref: string): RoleEntry {
  const found = roleEntries(methods).find((e) => e.ref === ref);
  if (found === undefined) throw xenErrors.handleInvalid("role", ref);
  return found;
}

/** A role's permissions (itself for a permission), as xapi's get_permissions expands them. */
function leaves(methods: MethodTable, of: RoleEntry): RoleEntry[] {
  return of.isRole ? roleEntries(methods).filter((e) => !e.isRole && allows(of.needs, e.needs)) : [of];
}

/** The roles holding a permission, highest first. */
function holders(methods: MethodTable, permission: RoleEntry): string[] {
  return roleEntries(methods)
    .filter((e) => e.isRole && allows(e.needs, permission.needs))
    .map((e) => e.ref);
}

const FIELDS = ["uuid", "name_label", "name_description", "subroles", "is_internal"] as const;

export const roleCalls: MethodDef[] = [
  method("role.get_all", [], ({ ts }) => roleEntries(ts.methods).map((e) => e.ref)),
  method("role.get_all_records", [], ({ ts }) => Object.fromEntries(roleEntries(ts.methods).map((e) => [e.ref, { ...e.record }]))),
  method("role.get_record", [["self", zRef]], ({ ts }, ref) => entry(ts.methods, ref).record),
  method("role.get_by_uuid", [["uuid", zString]], ({ ts }, uuid) => {
    const found = roleEntries(ts.methods).find((e) => e.record.uuid === uuid);
    if (found === undefined) throw xenErrors.uuidInvalid("role", uuid);
    return found.ref;
  }),
  // An exact, lower-case name: `vm.destroy` finds the permission, `VM.destroy` nothing (as in xapi).
  method("role.get_by_name_label", [["label", zString]], ({ ts }, label) => roleEntries(ts.methods).filter((e) => e.record.name_label === label).map((e) => e.ref)),
  method("role.get_permissions", [["self", zRef]], ({ ts }, ref) => leaves(ts.methods, entry(ts.methods, ref)).map((e) => e.ref)),
  method("role.get_permissions_name_label", [["self", zRef]], ({ ts }, ref) => leaves(ts.methods, entry(ts.methods, ref)).map((e) => String(e.record.name_label))),
  method("role.get_by_permission", [["permission", zRef]], ({ ts }, ref) => holders(ts.methods, entry(ts.methods, ref))),
  method("role.get_by_permission_name_label", [["label", zString]], ({ ts }, label) => {
    const permission = roleEntries(ts.methods).find((e) => !e.isRole && e.record.name_label === label);
    return permission === undefined ? [] : holders(ts.methods, permission);
  }),
  ...FIELDS.map((field) => method(`role.get_${field}`, [["self", zRef]], ({ ts }, ref) => entry(ts.methods, ref).record[field]!)),
];
