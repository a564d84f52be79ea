// xapi's six roles, in their strict order (each holds every permission of the roles below it), for the
// toolstack that enforces them and the console that shows them (browser and server alike).

/** Highest first. */
export const ROLES = ["pool-admin", "pool-operator", "vm-power-admin", "vm-admin", "vm-operator", "read-only"] as const;
export type Role = (typeof ROLES)[number];

export function isRole(name: string): name is Role {
  return (ROLES as readonly string[]).includes(name);
}

/** Whether a user holding `held` may do what needs `needed`. */
export function allows(held: Role, needed: Role): boolean {
  return ROLES.indexOf(held) <= ROLES.indexOf(needed);
}

/** The highest of `roles`, or undefined for none. */
export function highest(roles: Iterable<Role>): Role | undefined {
  let best: Role | undefined;
  for (const role of roles) if (best === undefined || allows(role, best)) best = role;
  return best;
}

/** The roles that hold a permission needing `needed`, highest first. */
export function rolesWith(needed: Role): Role[] {
  return ROLES.filter((role) => allows(role, needed));
}
