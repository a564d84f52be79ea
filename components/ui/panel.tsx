import { useId, type ReactNode } from "react";
import { cn } from "./cn.ts";

const tones = {
  neutral: "border-zinc-200 bg-white dark:border-zinc-800 dark:bg-zinc-900/60",
  info: "border-sky-200 bg-sky-50/60 dark:border-sky-900/70 dark:bg-sky-950/30",
  warning: "border-amber-300 bg-amber-50/70 dark:border-amber-900/80 dark:bg-amber-950/30",
  danger: "border-red-300 bg-red-50/70 dark:border-red-900/80 dark:bg-red-950/30",
} as const;

const marks = {
  neutral: "bg-zinc-400 dark:bg-zinc-500",
  info: "bg-sky-500",
  warning: "bg-amber-500",
  danger: "bg-red-500",
} as const;

export interface PanelProps {
  title: string;
  description?: ReactNode;
  tone?: keyof typeof tones;
  /** Heading level inside the page outline; panels directly under a page's h1 use 2. */
  level?: 2 | 3;
  /** Extra controls shown beside the title. */
  actions?: ReactNode;
  id?: string;
  className?: string;
  children?: ReactNode;
}

/** A titled region: notices, empty states, errors and lists that deserve their own landmark. */
export function Panel({ title, description, tone = "neutral", level = 2, actions, id, className, children }: PanelProps) {
  const headingId = useId();
  const Heading = level === 2 ? "h2" : "h3";
  return (
    <section id={id} aria-labelledby={headingId} className={cn("rounded-xl border p-4 sm:p-5", tones[tone], className)}>
      <div className="flex flex-wrap items-start justify-between gap-3">
        <div className="flex min-w-0 items-start gap-2.5">
          <span aria-hidden="true" className={cn("mt-1.5 size-2 shrink-0 rounded-full", marks[tone])} />
          <div className="min-w-0">
            <Heading id={headingId} className="text-sm font-semibold text-zinc-950 dark:text-white">
              {title}
            </Heading>
            {description ? <div className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">{description}</div> : null}
          </div>
        </div>
        {actions}
      </div>
      {/* Indented past the tone mark so the content lines up with the title. */}
      {children ? <div className="mt-4 sm:pl-[1.125rem]">{children}</div> : null}
    </section>
  );
}
