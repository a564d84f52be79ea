import { QueryClient } from "@tanstack/react-query";

/** One QueryClient per browser session (see `TRPCReactProvider`); also used for each server render. */
export function makeQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: {
      queries: {
        // A scan spawns one process per plugin: do not repeat it on every mount or quick tab switch.
        staleTime: 30_000,
        // Plugin failures are deterministic more often than not; one retry covers a hiccup without hiding the error.
        retry: 1,
      },
    },
  });
}
