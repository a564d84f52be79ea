"use client";

import { useEffect, useId, useRef, type ReactNode } from "react";
import { cn } from "./cn.ts";

export interface DialogProps {
  open: boolean;
  onClose: () => void;
  title: string;
  description?: ReactNode;
  className?: string;
  children?: ReactNode;
}

/**
 * A modal on the native `<dialog>`: the browser traps focus, Escape closes it, and the page behind is inert.
 * Labelled by its title (and described by its description), so tests and screen readers find it by name.
 */
export function Dialog({ open, onClose, title, description, className, children }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const descriptionId = useId();

  useEffect(() => {
    const dialog = ref.current;
    if (dialog === null) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);

  return (
    <dialog
      ref={ref}
      aria-labelledby={titleId}
      aria-describedby={description ? descriptionId : undefined}
      // Escape and form method="dialog" close the element itself; tell the owner so its state follows.
      onClose={() => open && onClose()}
      onCancel={(event) => {
        event.preventDefault();
        onClose();
      }}
      className={cn(
        "m-auto w-[calc(100%-2rem)] max-w-lg rounded-xl border border-zinc-200 bg-white p-0 text-zinc-900 shadow-xl backdrop:bg-zinc-950/50 dark:border-zinc-800 dark:bg-zinc-900 dark:text-zinc-100",
        className,
      )}
    >
      {open ? (
        <div className="flex max-h-[85dvh] flex-col gap-4 overflow-y-auto p-5">
          <div>
            <h2 id={titleId} className="text-base font-semibold tracking-tight text-zinc-950 dark:text-white">
              {title}
            </h2>
            {description ? (
              <div id={descriptionId} className="mt-1 text-sm text-zinc-600 dark:text-zinc-400">
                {description}
              </div>
            ) : null}
          </div>
          {children}
        </div>
      ) : null}
    </dialog>
  );
}

/** The row of buttons at the bottom of a dialog, primary action last (right). */
export function DialogActions({ className, children }: { className?: string; children: ReactNode }) {
  return <div className={cn("flex flex-wrap justify-end gap-2 pt-1", className)}>{children}</div>;
}
