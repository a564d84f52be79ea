"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useCallback } from "react";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";

/** A failed call in words: zod's per-field messages rather than its JSON, else the server's sentence. */
export function errorText(error: { message: string; data?: { zodError?: { formErrors: string[]; fieldErrors: Record<string, string[] | undefined> } | null } | null } | null): string | undefined {
  if (error === null) return undefined;
  const zod = error.data?.zodError;
  if (zod) {
    const messages = [...zod.formErrors, ...Object.values(zod.fieldErrors).flatMap((m) => m ?? [])];
    if (messages.length > 0) return messages.join(" ");
  }
  return error.message;
}

/** After a change: the volume lists (this SR's and any other's, e.g. a copy's target) and the SR figures. */
export function useRefreshVolumes(): () => Promise<void> {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  return useCallback(async () => {
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.volumes.pathKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.srs.pathKey() }),
    ]);
  }, [queryClient, trpc]);
}

/** A change's onSuccess: the lists refresh first, so what `then` reports (or closes onto) is already on screen. */
export function useRefreshThen<TArgs extends unknown[]>(then: (...args: TArgs) => void): (...args: TArgs) => Promise<void> {
  const refresh = useRefreshVolumes();
  return async (...args) => {
    await refresh();
    then(...args);
  };
}
