// Who is logged in and what their role lets them do (the pages disable the rest, saying why).
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { accessOf } from "../../auth/access.ts";
import { ZAccessResponse } from "./schema.ts";

export const accessRouter = createTRPCRouter({
  me: authedProcedure.output(ZAccessResponse).query(({ ctx }) => accessOf(ctx.session, ctx.xapi)),
});
