"use client";

import { useQuery } from "@tanstack/react-query";
import { type AccessView, type Verdict, verdict } from "@/lib/access.ts";
import type { ConsoleAction } from "@/lib/console-actions.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";

const CHECKING: Verdict = { allowed: false, reason: "Checking what your role allows…" };

/** Who is logged in and what their role allows (read once a page load: a change of role ends the session). */
export function useAccess(): AccessView | undefined {
  const trpc = useTRPC();
  return useQuery(trpc.access.me.queryOptions(undefined, { staleTime: Number.POSITIVE_INFINITY })).data;
}

/** Whether the user may do `action`; if not, why, in words for the control's tooltip. */
export function useVerdict(action: ConsoleAction): Verdict {
  const access = useAccess();
  return access === undefined ? CHECKING : verdict(access, action);
}
