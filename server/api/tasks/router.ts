// The task page's API: the running tasks and a page of the finished ones (list), cancel and remove from the history, and the start of a
// copy or mirror of a volume (an Async. call: a task like any other).
import "server-only";

import { createTRPCRouter, authedProcedure } from "../trpc.ts";
import { cancelTask, destroyTask, listTasks } from "./list-tasks.ts";
import { ZCopySourcesResponse, ZListTasksResponse, ZListTasksSchema, ZStartDataTaskResponse, ZStartDataTaskSchema, ZTaskRefSchema } from "./schema.ts";
import { copySources, startDataTask } from "./start-data-task.ts";

export const tasksRouter = createTRPCRouter({
  list: authedProcedure
    .input(ZListTasksSchema)
    .output(ZListTasksResponse)
    .query(({ ctx, input }) => listTasks(ctx.xapi, ctx.pluginRoot, input)),

  cancel: authedProcedure.input(ZTaskRefSchema).mutation(({ ctx, input }) => cancelTask(ctx.xapi, input.ref)),

  destroy: authedProcedure.input(ZTaskRefSchema).mutation(({ ctx, input }) => destroyTask(ctx.xapi, input.ref)),

  copySources: authedProcedure.output(ZCopySourcesResponse).query(({ ctx }) => copySources(ctx.xapi)),

  startDataTask: authedProcedure
    .input(ZStartDataTaskSchema)
    .output(ZStartDataTaskResponse)
    .mutation(async ({ ctx, input }) => ({ task: await startDataTask(ctx.xapi, input) })),
});
