// The logged-in user's access as the pages need it: their role, and the least role each permission needs, read
// once from the toolstack's role table (role.get_all_records: every role lists the permissions it holds).
// Not marked "server-only": the upload route (pages/api, outside React's server graph) asks it too, and the
// marker fails every request there (500).

import { z } from "zod";
import type { AccessView } from "../../lib/access.ts";
import { isRole, ROLES, type Role } from "../../lib/roles.ts";
import type { ConsoleSession } from "./session.ts";
import type { XenApiClient } from "../xenapi/client.ts";

const ZRoleRecord = z.looseObject({ name_label: z.string(), subroles: z.array(z.string()), is_internal: z.boolean() });

/** The table is the toolstack's and does not change while it runs: asked once, again only after a failure. */
let needs: Promise<Record<string, Role>> | undefined;

async function readNeeds(xapi: XenApiClient): Promise<Record<string, Role>> {
  const records = await xapi.call(z.record(z.string(), ZRoleRecord), "role.get_all_records");
  const names = new Map(Object.entries(records).map(([ref, record]) => [ref, record.name_label]));
  const out: Record<string, Role> = {};
  // Lowest role first: each permission keeps the least role holding it.
  for (const role of [...ROLES].reverse()) {
    const record = Object.values(records).find((r) => !r.is_internal && r.name_label === role);
    for (const ref of record?.subroles ?? []) {
      const name = names.get(ref);
      if (name !== undefined && out[name] === undefined && isRole(role)) out[name] = role;
    }
  }
  return out;
}

export async function permissionNeeds(xapi: XenApiClient): Promise<Record<string, Role>> {
  needs ??= readNeeds(xapi).catch((error: unknown) => {
    needs = undefined;
    throw error;
  });
  return needs;
}

export async function accessOf(session: ConsoleSession, xapi: XenApiClient): Promise<AccessView> {
  // root may do everything: no table needed (nor a toolstack to read it from).
  return { user: session.user, role: session.role, superuser: session.superuser, needs: session.superuser ? {} : await permissionNeeds(xapi) };
}
