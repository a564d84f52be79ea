// The pool's hosts: who they are, whether they are live, which is the master, and the SRs each connects to.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { listHosts } from "./list-hosts.ts";
import { ZListHostsResponse } from "./schema.ts";

export const hostsRouter = createTRPCRouter({
  list: authedProcedure.output(ZListHostsResponse).query(({ ctx }) => listHosts(ctx.xapi)),
});
