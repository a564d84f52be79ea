"use client";

import { useEffect } from "react";

/**
 * Scrolls to the element the URL's #fragment names once `ready` (its content loaded): the browser and the
 * router only try when the page first renders, before data-dependent sections exist.
 */
export function useScrollToHash(ready: boolean): void {
  useEffect(() => {
    if (!ready || window.location.hash.length < 2) return;
    document.getElementById(decodeURIComponent(window.location.hash.slice(1)))?.scrollIntoView({ block: "start" });
  }, [ready]);
}
