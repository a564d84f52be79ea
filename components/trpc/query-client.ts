import { MutationCache, QueryCache, QueryClient } from "@tanstack/react-query";

/**
 * One QueryClient per browser session (see `TRPCReactProvider`); also used for each server render.
 * `onError` sees every failed query and mutation (the browser's sends a logged-out user to the login page).
 */
export function makeQueryClient(onError: (error: unknown) => void = () => {}): QueryClient {
  return new QueryClient({
    queryCache: new QueryCache({ onError }),
    mutationCache: new MutationCache({ onError }),
    defaultOptions: {
      queries: {
        // A scan spawns one process per plugin: do not repeat it on every mount or quick tab switch.
        staleTime: 30_000,
        // Plugin failures are deterministic more often than not; one retry covers a hiccup without hiding the error.
        retry: (failures, error) => failures < 1 && !isRefusal(error),
      },
    },
  });
}

/** Errors a retry cannot fix: the caller is logged out, or asked for something that does not exist. */
function isRefusal(error: unknown): boolean {
  const code = (error as { data?: { code?: string } } | null)?.data?.code;
  return code === "UNAUTHORIZED" || code === "NOT_FOUND" || code === "BAD_REQUEST";
}
