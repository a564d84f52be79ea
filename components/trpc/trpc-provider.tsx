"use client";

import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { createTRPCClient, httpBatchLink } from "@trpc/client";
import { createTRPCContext } from "@trpc/tanstack-react-query";
import { useState, type ReactNode } from "react";
import type { AppRouter } from "@/server/api/root.ts";
import { makeQueryClient } from "./query-client.ts";

const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();

/** Typed query and mutation options for every procedure, e.g. `useQuery(useTRPC().plugins.list.queryOptions())`. */
export { useTRPC };

let browserQueryClient: QueryClient | undefined;

function getQueryClient(): QueryClient {
  // The server renders each request with a fresh client so no data leaks between requests; the browser keeps
  // one, also across a suspended first render.
  if (typeof window === "undefined") return makeQueryClient();
  browserQueryClient ??= makeQueryClient();
  return browserQueryClient;
}

export function TRPCReactProvider({ children }: { children: ReactNode }) {
  const queryClient = getQueryClient();
  const [trpcClient] = useState(() => createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: "/api/trpc" })] }));
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
