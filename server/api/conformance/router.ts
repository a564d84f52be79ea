import { createTRPCRouter } from "../trpc.ts";

export const conformanceRouter = createTRPCRouter({});
