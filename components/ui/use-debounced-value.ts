"use client";

import { useEffect, useState } from "react";

/** `value` once it has not changed for `ms`: what a search box sends to the server while the user types. */
export function useDebouncedValue<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}
