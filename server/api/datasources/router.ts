import { createTRPCRouter } from "../trpc.ts";

export const datasourcesRouter = createTRPCRouter({});
