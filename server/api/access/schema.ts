// What the access router returns: who is logged in, their role, and what each permission needs.
import { z } from "zod";
import { ROLES } from "../../../lib/roles.ts";

export const ZAccessResponse = z.object({
  user: z.string(),
  role: z.enum(ROLES),
  superuser: z.boolean(),
  needs: z.record(z.string(), z.enum(ROLES)),
});
