import { createTRPCRouter } from "../trpc.ts";

export const vmsRouter = createTRPCRouter({});
