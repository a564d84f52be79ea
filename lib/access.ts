// Whether the logged-in user may do one of the console's actions, and if not, why in words (browser and server
// alike): root may do everything; anyone else needs a role at least as high as the one the action's permission
// needs, as the toolstack's role table says (`needs`, from role.get_all_records).
import { ACTION_PERMISSIONS, type ConsoleAction } from "./console-actions.ts";
import { allows, type Role } from "./roles.ts";

export interface AccessView {
  user: string;
  /** The user's role (root: pool-admin, and `superuser`). */
  role: Role;
  superuser: boolean;
  /** The least role each permission needs. */
  needs: Record<string, Role>;
}

export type Verdict = { allowed: true; reason?: undefined } | { allowed: false; reason: string };

export function verdict(access: AccessView, action: ConsoleAction): Verdict {
  if (access.superuser) return { allowed: true };
  const needed = access.needs[ACTION_PERMISSIONS[action]];
  // A permission the toolstack does not know (an older toolstack): only the pool administrator.
  const least: Role = needed ?? "pool-admin";
  if (allows(access.role, least)) return { allowed: true };
  return { allowed: false, reason: `Needs the ${least} role${least === "pool-admin" ? "" : " or higher"}; you are ${access.role}.` };
}
