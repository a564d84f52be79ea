// The console's API: one small router per feature, combined here.
import "server-only";

import { accessRouter } from "./access/router.ts";
import { auditRouter } from "./audit/router.ts";
import { conformanceRouter } from "./conformance/router.ts";
import { datasourcesRouter } from "./datasources/router.ts";
import { downloadsRouter } from "./downloads/router.ts";
import { hostsRouter } from "./hosts/router.ts";
import { pluginsRouter } from "./plugins/router.ts";
import { srsRouter } from "./srs/router.ts";
import { tasksRouter } from "./tasks/router.ts";
import { transfersRouter } from "./transfers/router.ts";
import { usersRouter } from "./users/router.ts";
import { createCallerFactory, createTRPCRouter } from "./trpc.ts";
import { vmsRouter } from "./vms/router.ts";
import { volumesRouter } from "./volumes/router.ts";

export const appRouter = createTRPCRouter({
  access: accessRouter,
  plugins: pluginsRouter,
  conformance: conformanceRouter,
  hosts: hostsRouter,
  srs: srsRouter,
  volumes: volumesRouter,
  datasources: datasourcesRouter,
  vms: vmsRouter,
  tasks: tasksRouter,
  downloads: downloadsRouter,
  transfers: transfersRouter,
  users: usersRouter,
  audit: auditRouter,
});

export type AppRouter = typeof appRouter;

/** Calls procedures in-process, e.g. `await createCaller(ctx).plugins.list()`. */
export const createCaller = createCallerFactory(appRouter);
