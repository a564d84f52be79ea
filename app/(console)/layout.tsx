import type { ReactNode } from "react";
import { logOutAction } from "@/app/login/actions.ts";
import { AccessProvider } from "@/components/access/use-verdict.tsx";
import { SiteNav } from "@/components/site-nav.tsx";
import { requireSession } from "@/server/auth/current.ts";

// Every console page: logged-in users only (others go to the login page and come back).
export default async function ConsoleLayout({ children }: { children: ReactNode }) {
  const session = await requireSession();
  return (
    <AccessProvider who={{ user: session.user, role: session.role, superuser: session.superuser }}>
      <div className="md:flex">
        <SiteNav user={session.user} role={session.superuser ? "superuser" : session.role} logOut={logOutAction} />
        <main id="main" tabIndex={-1} className="min-w-0 flex-1 outline-none">
          <div className="mx-auto flex max-w-6xl flex-col gap-8 px-4 py-6 sm:px-6 lg:px-10 lg:py-10">{children}</div>
        </main>
      </div>
    </AccessProvider>
  );
}
