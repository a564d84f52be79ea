"use client";

import { usePathname } from "next/navigation";
import { useState, type ComponentType, type ComponentProps } from "react";
import { AuditIcon, CloseIcon, DashboardIcon, HostIcon, MenuIcon, PluginIcon, StorageIcon, TasksIcon, UsersIcon, VmIcon } from "./nav-icons.tsx";
import { cn } from "./ui/cn.ts";
import { expectLogout } from "./trpc/trpc-provider.tsx";
import { IntentLink } from "./ui/intent-link.tsx";

interface NavItem {
  href: string;
  label: string;
  icon: ComponentType<ComponentProps<"svg">>;
}

const items: NavItem[] = [
  { href: "/", label: "Dashboard", icon: DashboardIcon },
  { href: "/storage", label: "Storage", icon: StorageIcon },
  { href: "/hosts", label: "Hosts", icon: HostIcon },
  { href: "/vms", label: "VMs", icon: VmIcon },
  { href: "/tasks", label: "Tasks", icon: TasksIcon },
  { href: "/plugins", label: "Plugins", icon: PluginIcon },
  { href: "/users", label: "Users", icon: UsersIcon },
  { href: "/audit", label: "Audit", icon: AuditIcon },
];

function isCurrent(pathname: string, href: string): boolean {
  return href === "/" ? pathname === "/" : pathname === href || pathname.startsWith(`${href}/`);
}

export interface SiteNavProps {
  user: string;
  /** The user's role ("pool-admin (root)" for the local superuser). */
  role: string;
  /** The server action that logs out; passed by the layout, so the nav holds no server code. */
  logOut: () => Promise<void>;
}

/** Sidebar on wide screens; a bar with a menu button below the md breakpoint. */
export function SiteNav({ user, role, logOut }: SiteNavProps) {
  // Nullable in its types once a pages/ dir exists (the download route); always set under the App Router.
  const pathname = usePathname() ?? "/";
  const [open, setOpen] = useState(false);

  return (
    // The column draws the sidebar down the whole page; the header inside it sticks to the viewport. Below md the
    // column dissolves so the header sticks to the top of the page instead.
    <div className="max-md:contents md:w-60 md:shrink-0 md:border-r md:border-zinc-200 md:bg-white md:dark:border-zinc-800 md:dark:bg-zinc-950">
      <header className="sticky top-0 z-30 border-b border-zinc-200 bg-white/90 backdrop-blur md:h-dvh md:overflow-y-auto md:border-b-0 md:bg-transparent md:backdrop-blur-none dark:border-zinc-800 dark:bg-zinc-950/90 md:dark:bg-transparent">
        <div className="flex h-14 items-center justify-between gap-3 px-4 md:h-16 md:px-5">
          <IntentLink href="/" className="flex items-center gap-2.5 rounded-md focus-visible:outline-2 focus-visible:outline-offset-4 focus-visible:outline-sky-600">
            <span aria-hidden="true" className="grid size-7 place-items-center rounded-md bg-zinc-900 text-xs font-bold text-white dark:bg-white dark:text-zinc-900">
              H
            </span>
            <span className="flex flex-col leading-none">
              <span className="text-sm font-semibold tracking-tight text-zinc-950 dark:text-white">Hangar</span>
              <span className="mt-1 text-[11px] text-zinc-500 dark:text-zinc-400">SMAPIv3 storage console</span>
            </span>
          </IntentLink>
          <button
            type="button"
            className="inline-flex size-9 items-center justify-center rounded-md text-zinc-700 hover:bg-zinc-100 focus-visible:outline-2 focus-visible:outline-sky-600 md:hidden dark:text-zinc-300 dark:hover:bg-zinc-800"
            aria-expanded={open}
            aria-controls="site-nav"
            aria-label={open ? "Close menu" : "Open menu"}
            onClick={() => setOpen((value) => !value)}
          >
            {open ? <CloseIcon className="size-5" /> : <MenuIcon className="size-5" />}
          </button>
        </div>
        <nav id="site-nav" aria-label="Main" className={cn(open ? "block" : "hidden", "border-t border-zinc-200 px-3 py-3 md:block md:border-t-0 md:py-2 dark:border-zinc-800")}>
          <ul className="flex flex-col gap-0.5">
            {items.map(({ href, label, icon: ItemIcon }) => {
              const current = isCurrent(pathname, href);
              return (
                <li key={href}>
                  <IntentLink
                    href={href}
                    aria-current={current ? "page" : undefined}
                    onClick={() => setOpen(false)}
                    className={cn(
                      "flex items-center gap-3 rounded-md px-2.5 py-2 text-sm font-medium transition-colors",
                      "focus-visible:outline-2 focus-visible:outline-offset-0 focus-visible:outline-sky-600",
                      current
                        ? "bg-zinc-100 text-zinc-950 dark:bg-zinc-800/80 dark:text-white"
                        : "text-zinc-600 hover:bg-zinc-50 hover:text-zinc-950 dark:text-zinc-400 dark:hover:bg-zinc-900 dark:hover:text-white",
                    )}
                  >
                    <ItemIcon className={cn("size-4 shrink-0", current ? "text-zinc-900 dark:text-white" : "text-zinc-400 dark:text-zinc-500")} />
                    {label}
                  </IntentLink>
                </li>
              );
            })}
          </ul>
          <form action={logOut} onSubmit={expectLogout} className="mt-4 flex items-end justify-between gap-2 border-t border-zinc-200 px-2.5 pt-3 dark:border-zinc-800">
            <span className="min-w-0 text-xs text-zinc-500 dark:text-zinc-400">
              <span className="block truncate">
                Logged in as <span className="font-medium text-zinc-800 dark:text-zinc-200">{user}</span>
              </span>
              <span className="block truncate">
                Role: <span className="font-medium text-zinc-800 dark:text-zinc-200">{role}</span>
              </span>
            </span>
            <button
              type="submit"
              className="shrink-0 rounded-md px-2 py-1 text-xs font-medium whitespace-nowrap text-zinc-700 hover:bg-zinc-100 focus-visible:outline-2 focus-visible:outline-sky-600 dark:text-zinc-300 dark:hover:bg-zinc-800"
            >
              Log out
            </button>
          </form>
        </nav>
      </header>
    </div>
  );
}
