"use client";

import { useEffect, useId, useRef, useState, type KeyboardEvent, type ReactNode } from "react";
import { buttonClasses } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";

export interface MenuAction {
  key: string;
  /** Visible text; put the object's name in an sr-only span so the accessible name says what is acted on. */
  label: ReactNode;
  onSelect: () => void;
  disabled?: boolean;
  /** Why it is disabled, shown under the label. */
  hint?: string;
  /** Why the user's role may not do it: shown under the label, the item kept in the menu and focusable. */
  denied?: string;
  tone?: "danger";
}

/**
 * A button opening a menu of actions (WAI-ARIA menu button): arrows move, Enter/Space choose, Escape and Tab
 * close, a click outside closes. Positioned under the button, right-aligned, in the page's flow.
 */
export function ActionMenu({ label, actions, className }: { label: string; actions: MenuAction[]; className?: string }) {
  const [open, setOpen] = useState(false);
  const menuId = useId();
  const buttonRef = useRef<HTMLButtonElement>(null);
  const menuRef = useRef<HTMLDivElement>(null);

  const items = () => [...(menuRef.current?.querySelectorAll<HTMLButtonElement>("[role=menuitem]:not([disabled])") ?? [])];

  useEffect(() => {
    if (!open) return;
    items()[0]?.focus();
    const onPointerDown = (event: PointerEvent) => {
      const target = event.target as Node;
      if (!menuRef.current?.contains(target) && !buttonRef.current?.contains(target)) setOpen(false);
    };
    document.addEventListener("pointerdown", onPointerDown);
    return () => document.removeEventListener("pointerdown", onPointerDown);
  }, [open]);

  const close = (refocus: boolean) => {
    setOpen(false);
    if (refocus) buttonRef.current?.focus();
  };

  const onMenuKeyDown = (event: KeyboardEvent) => {
    const list = items();
    const index = list.indexOf(document.activeElement as HTMLButtonElement);
    const move = (to: number) => {
      event.preventDefault();
      list[(to + list.length) % list.length]?.focus();
    };
    if (event.key === "ArrowDown") move(index + 1);
    else if (event.key === "ArrowUp") move(index - 1);
    else if (event.key === "Home") move(0);
    else if (event.key === "End") move(list.length - 1);
    else if (event.key === "Escape") {
      event.preventDefault();
      close(true);
    } else if (event.key === "Tab") close(false);
  };

  return (
    <div className={cn("relative inline-block", className)}>
      <button
        ref={buttonRef}
        type="button"
        aria-label={label}
        aria-haspopup="menu"
        aria-expanded={open}
        aria-controls={open ? menuId : undefined}
        onClick={() => setOpen((was) => !was)}
        onKeyDown={(event) => {
          if (event.key === "ArrowDown" && !open) {
            event.preventDefault();
            setOpen(true);
          }
        }}
        className={buttonClasses({ variant: "secondary", size: "sm" })}
      >
        Actions
        <svg aria-hidden="true" viewBox="0 0 16 16" className="size-3.5" fill="currentColor">
          <path d="M4.2 6.2a.75.75 0 0 1 1.06 0L8 8.94l2.74-2.74a.75.75 0 1 1 1.06 1.06l-3.27 3.27a.75.75 0 0 1-1.06 0L4.2 7.26a.75.75 0 0 1 0-1.06Z" />
        </svg>
      </button>
      {open ? (
        <div
          ref={menuRef}
          id={menuId}
          role="menu"
          aria-label={label}
          onKeyDown={onMenuKeyDown}
          className="absolute right-0 z-20 mt-1 flex w-56 flex-col rounded-lg border border-zinc-200 bg-white p-1 shadow-lg dark:border-zinc-700 dark:bg-zinc-900"
        >
          {actions.map((action) => (
            <button
              key={action.key}
              aria-describedby={(action.denied ?? action.hint) ? `${menuId}-${action.key}-hint` : undefined}
              aria-disabled={action.denied === undefined ? undefined : "true"}
              type="button"
              role="menuitem"
              tabIndex={-1}
              disabled={action.denied === undefined && action.disabled}
              onClick={() => {
                if (action.denied !== undefined) return;
                close(true);
                action.onSelect();
              }}
              className={cn(
                "flex flex-col items-start rounded-md px-2.5 py-1.5 text-left text-sm outline-none focus-visible:bg-zinc-100 disabled:cursor-not-allowed disabled:opacity-55 enabled:hover:bg-zinc-100 aria-disabled:cursor-not-allowed aria-disabled:opacity-60 dark:focus-visible:bg-zinc-800 dark:enabled:hover:bg-zinc-800",
                action.tone === "danger" ? "text-red-700 dark:text-red-400" : "text-zinc-800 dark:text-zinc-200",
              )}
            >
              <span>{action.label}</span>
              {(action.denied ?? action.hint) ? (
                // Described by, not part of the name: the name stays "Destroy <SR>".
                <span id={`${menuId}-${action.key}-hint`} aria-hidden="true" className="text-xs text-zinc-500 dark:text-zinc-400">
                  {action.denied ?? action.hint}
                </span>
              ) : null}
            </button>
          ))}
        </div>
      ) : null}
    </div>
  );
}
