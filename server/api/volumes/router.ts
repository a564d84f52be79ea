import { createTRPCRouter } from "../trpc.ts";

export const volumesRouter = createTRPCRouter({});
