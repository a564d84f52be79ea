"use client";

import { useQuery } from "@tanstack/react-query";
import { createContext, type ReactNode, useContext } from "react";
import { type AccessView, type Verdict, verdict } from "@/lib/access.ts";
import type { ConsoleAction } from "@/lib/console-actions.ts";
import type { Role } from "@/lib/roles.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";

const CHECKING: Verdict = { allowed: false, reason: "Checking what your role allows…" };

interface Who {
  user: string;
  role: Role;
  superuser: boolean;
}

const WhoContext = createContext<Who | undefined>(undefined);

/** Who is logged in, as the layout knows it from the session: root's actions need no table to be allowed. */
export function AccessProvider({ who, children }: { who: Who; children: ReactNode }) {
  return <WhoContext.Provider value={who}>{children}</WhoContext.Provider>;
}

/** Who is logged in and what their role allows (read once a page load: a change of role ends the session). */
export function useAccess(): AccessView | undefined {
  const trpc = useTRPC();
  const who = useContext(WhoContext);
  const superuser = who?.superuser === true;
  const table = useQuery(trpc.access.me.queryOptions(undefined, { staleTime: Number.POSITIVE_INFINITY, enabled: !superuser }));
  if (superuser) return { ...who!, needs: {} };
  return table.data;
}

/** Whether the user may do `action`; if not, why, in words for the control's tooltip. */
export function useVerdict(action: ConsoleAction): Verdict {
  const access = useAccess();
  return access === undefined ? CHECKING : verdict(access, action);
}
