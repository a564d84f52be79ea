// Users, roles and the audit trail as a toolstack feature: the role, subject and external-auth calls, and
// GET /audit_log.
import { registerStoredClasses } from "../objects.ts";
import type { Feature } from "../toolstack.ts";
import { auditLogRoute } from "./audit-route.ts";
import { externalAuthCalls } from "./external-auth.ts";
import { roleCalls } from "./role-calls.ts";
import { subjectCalls } from "./subjects.ts";

export const RBAC_FEATURE: Feature = {
  calls: [...roleCalls, ...subjectCalls, ...externalAuthCalls],
  routes: { "/audit_log": auditLogRoute },
  start: async (ts) => registerStoredClasses(ts.events, ts.objects, "subject"),
};
