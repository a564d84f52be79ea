"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import type { ComponentProps } from "react";

type IntentLinkProps = Omit<ComponentProps<typeof Link>, "prefetch" | "href"> & { href: string };

/**
 * A link prefetched when it is reached for (hover, focus), not as soon as it is on screen. The console's pages
 * render on the server from the toolstack and the plugins, so a nav or a list of links prefetched on sight
 * would render every page it links to at each view (a VMs page rendered each VM's page and each disk's SR page,
 * with their plugin calls).
 */
export function IntentLink({ href, onMouseEnter, onFocus, ...props }: IntentLinkProps) {
  const router = useRouter();
  return (
    <Link
      {...props}
      href={href}
      prefetch={false}
      onMouseEnter={(event) => {
        router.prefetch(href);
        onMouseEnter?.(event);
      }}
      onFocus={(event) => {
        router.prefetch(href);
        onFocus?.(event);
      }}
    />
  );
}
