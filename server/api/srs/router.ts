import { createTRPCRouter } from "../trpc.ts";

export const srsRouter = createTRPCRouter({});
