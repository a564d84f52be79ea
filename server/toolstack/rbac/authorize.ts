// The one check every call and HTTP action goes through: root passes; anyone else needs a role at least as
// high as the action's.
import type { Session } from "../sessions.ts";
import { allows, rbacErrors, type Role } from "./roles.ts";

/** Whether `session` may do what needs `needed`. */
export function permits(session: Session, needed: Role): boolean {
  return session.superuser || (session.role !== null && allows(session.role, needed));
}

/** RBAC_PERMISSION_DENIED [permission, …] unless `session` may do what needs `needed`. */
export function authorize(session: Session, permission: string, needed: Role): void {
  if (!permits(session, needed)) throw rbacErrors.denied(permission, needed);
}

/** Who owns what a session makes (a task): its user, whichever of their sessions made it. */
export function ownerOf(session: Session): string {
  return session.superuser ? "root" : session.authUserSid;
}
