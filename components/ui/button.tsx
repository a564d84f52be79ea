import { type ComponentProps, useId } from "react";
import { cn } from "./cn.ts";
import { DeniedTooltip } from "./denied-tooltip.tsx";

const variants = {
  primary:
    "bg-zinc-900 text-white shadow-sm hover:bg-zinc-700 dark:bg-zinc-100 dark:text-zinc-900 dark:hover:bg-white",
  secondary:
    "bg-white text-zinc-900 shadow-sm ring-1 ring-inset ring-zinc-300 hover:bg-zinc-50 dark:bg-zinc-900 dark:text-zinc-100 dark:ring-zinc-700 dark:hover:bg-zinc-800",
  danger: "bg-red-600 text-white shadow-sm hover:bg-red-500 dark:bg-red-600 dark:text-white dark:hover:bg-red-500",
  ghost: "text-zinc-700 hover:bg-zinc-100 hover:text-zinc-900 dark:text-zinc-300 dark:hover:bg-zinc-800 dark:hover:text-white",
} as const;

const sizes = {
  sm: "h-8 gap-1.5 px-2.5 text-xs",
  md: "h-9 gap-2 px-3.5 text-sm",
} as const;

export interface ButtonStyle {
  variant?: keyof typeof variants;
  size?: keyof typeof sizes;
}

/** Button look for other elements too, e.g. a `Link` that should read as an action. */
export function buttonClasses({ variant = "primary", size = "md" }: ButtonStyle = {}): string {
  return cn(
    "inline-flex shrink-0 items-center justify-center rounded-md font-medium transition-colors",
    "focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-sky-600 dark:focus-visible:outline-sky-400",
    "disabled:pointer-events-none disabled:opacity-50 aria-busy:cursor-progress",
    variants[variant],
    sizes[size],
  );
}

export interface ButtonProps extends ComponentProps<"button">, ButtonStyle {
  /**
   * Why the user may not do this (their role): the button stays in its place and focusable, does nothing, and
   * says why on hover and focus (and to screen readers, as its description).
   */
  deniedReason?: string;
}

export function Button({ variant, size, className, type = "button", deniedReason, ...props }: ButtonProps) {
  const reasonId = useId();
  if (deniedReason === undefined) return <button type={type} className={cn(buttonClasses({ variant, size }), className)} {...props} />;
  const { onClick: _onClick, disabled: _disabled, "aria-describedby": describedBy, ...rest } = props;
  return (
    <span className="group relative inline-flex">
      <button
        type={type}
        aria-disabled="true"
        // The reason first: it is why nothing happens; a description of the caller's own (a hint) follows it.
        aria-describedby={describedBy === undefined ? reasonId : `${reasonId} ${describedBy}`}
        onClick={(event) => event.preventDefault()}
        className={cn(buttonClasses({ variant, size }), "cursor-not-allowed opacity-50", className)}
        {...rest}
      />
      <DeniedTooltip id={reasonId} reason={deniedReason} />
    </span>
  );
}
