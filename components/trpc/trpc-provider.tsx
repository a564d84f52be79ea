"use client";

import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { TRPCClientError, createTRPCClient, httpBatchStreamLink } from "@trpc/client";
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
  browserQueryClient ??= makeQueryClient(returnToLoginWhenLoggedOut);
  return browserQueryClient;
}

/**
 * The user asked to log out (until they log in again): the queries still under way will be refused, and that is
 * no expired session to send them back from.
 */
let loggingOut = false;

export function expectLogout(): void {
  loggingOut = true;
}

export function expectLogin(): void {
  loggingOut = false;
}

/** An expired or missing session sends the browser to the login page, which brings it back here afterwards. */
function returnToLoginWhenLoggedOut(error: unknown): void {
  if (loggingOut || !(error instanceof TRPCClientError) || error.data?.code !== "UNAUTHORIZED") return;
  const here = `${window.location.pathname}${window.location.search}`;
  // A full load, not a client navigation: nothing of the logged-out user's cached data may survive.
  window.location.assign(new URL(`/login?${new URLSearchParams({ next: here, reason: "expired" })}`, window.location.origin));
}

export function TRPCReactProvider({ children }: { children: ReactNode }) {
  const queryClient = getQueryClient();
  // Streamed batches: a page's quick answers (an SR's header) arrive without waiting for its slow ones (10,000 volumes).
  const [trpcClient] = useState(() => createTRPCClient<AppRouter>({ links: [httpBatchStreamLink({ url: "/api/trpc" })] }));
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
