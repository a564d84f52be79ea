import "server-only";

import { headers } from "next/headers";
import { cache } from "react";
import { createCaller } from "./root.ts";
import { createTRPCContext } from "./trpc.ts";

// One context per server render, however many components call the API during it. Reading the request
// headers also keeps every page that uses the API rendered per request, never prerendered at build time.
const createContext = cache(async () => createTRPCContext({ headers: new Headers(await headers()) }));

/** The API for server components, called in-process: `await api.plugins.list()`. */
export const api = createCaller(createContext);
