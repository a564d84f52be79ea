import type { ComponentProps } from "react";
import { cn } from "./cn.ts";

/** Placeholder block shown while data loads; hidden from assistive technology (pair it with a status text). */
export function Skeleton({ className, ...props }: ComponentProps<"div">) {
  return <div aria-hidden="true" className={cn("animate-pulse rounded-md bg-zinc-200/80 dark:bg-zinc-800", className)} {...props} />;
}
