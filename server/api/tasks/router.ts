// The task page's API: every toolstack task (list), cancel and remove from the history, and the start of a
// copy or mirror of a volume (an Async. call: a task like any other).
import { createTRPCRouter, authedProcedure } from "../trpc.ts";
import { cancelTask, destroyTask, listTasks } from "./list-tasks.ts";
import { ZListTasksResponse, ZTaskRefSchema } from "./schema.ts";

export const tasksRouter = createTRPCRouter({
  list: authedProcedure.output(ZListTasksResponse).query(({ ctx }) => listTasks(ctx.xapi, ctx.pluginRoot)),

  cancel: authedProcedure.input(ZTaskRefSchema).mutation(({ ctx, input }) => cancelTask(ctx.xapi, input.ref)),

  destroy: authedProcedure.input(ZTaskRefSchema).mutation(({ ctx, input }) => destroyTask(ctx.xapi, input.ref)),
});
