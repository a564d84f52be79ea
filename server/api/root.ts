// The console's API: one small router per feature, combined here.
import { pluginsRouter } from "./plugins/router.ts";
import { createCallerFactory, createTRPCRouter } from "./trpc.ts";

export const appRouter = createTRPCRouter({
  plugins: pluginsRouter,
});

export type AppRouter = typeof appRouter;

/** Calls procedures in-process, e.g. `await createCaller(ctx).plugins.list()`. */
export const createCaller = createCallerFactory(appRouter);
