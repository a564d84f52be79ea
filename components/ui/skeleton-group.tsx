import type { ReactNode } from "react";

export interface SkeletonGroupProps {
  /** What is loading, in words: the status a screen reader hears while the placeholders show. */
  label: string;
  /** Shows the words too, for a load slow enough that the user should read why (a plugin scan). */
  showLabel?: boolean;
  className?: string;
  /** The placeholders, at the sizes of what will replace them. */
  children: ReactNode;
}

/** Placeholders where content is loading, with the status that says so. */
export function SkeletonGroup({ label, showLabel = false, className, children }: SkeletonGroupProps) {
  return (
    <div className={className}>
      <p role="status" className={showLabel ? "text-sm text-zinc-600 dark:text-zinc-400" : "sr-only"}>
        {label}
      </p>
      {children}
    </div>
  );
}
