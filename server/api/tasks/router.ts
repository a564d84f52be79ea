import { createTRPCRouter } from "../trpc.ts";

export const tasksRouter = createTRPCRouter({});
