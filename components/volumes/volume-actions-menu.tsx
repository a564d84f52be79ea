"use client";

// One row's actions as a menu on the top layer (a popover: outside the table's scroll box, light dismiss
// and Escape built in), keyboard-operable as a WAI-ARIA menu.
import { useEffect, useId, useLayoutEffect, useRef, useState, type KeyboardEvent } from "react";
import { verdict } from "@/lib/access.ts";
import type { ConsoleAction } from "@/lib/console-actions.ts";
import { useAccess } from "@/components/access/use-verdict.tsx";
import { cn } from "@/components/ui/cn.ts";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";

export type VolumeAction = "details" | "resize" | "snapshot" | "clone" | "revert" | "copy" | "download" | "rename" | "keys" | "cbt" | "destroy";

interface Item {
  action: VolumeAction;
  label: string;
  danger?: boolean;
}

/** What each item asks of the toolstack (details only reads). */
const ITEM_ACTIONS: Record<Exclude<VolumeAction, "details">, ConsoleAction> = {
  resize: "volumes.resize",
  snapshot: "volumes.snapshot",
  clone: "volumes.clone",
  revert: "volumes.revert",
  copy: "volumes.copy",
  download: "volumes.download",
  rename: "volumes.rename",
  keys: "volumes.setKey",
  cbt: "volumes.setCbt",
  destroy: "volumes.destroy",
};

/** "Actions for db", "Actions for db (snapshot)": a snapshot keeps its original's name. */
export function actionsLabel(volume: TVolumeRow): string {
  return `Actions for ${volume.name}${volume.isSnapshot ? " (snapshot)" : ""}`;
}

/** What a volume offers, given what the SR's plugin can do. */
export function actionsFor(volume: TVolumeRow, features: readonly string[]): Item[] {
  const has = (feature: string) => features.includes(feature);
  const items: Item[] = [{ action: "details", label: "Details…" }];
  if (volume.readWrite && has("VDI_RESIZE")) items.push({ action: "resize", label: "Resize…" });
  if (has("VDI_SNAPSHOT")) items.push({ action: "snapshot", label: "Take a snapshot" });
  if (has("VDI_CLONE")) items.push({ action: "clone", label: "Clone…" });
  if (volume.isSnapshot && volume.snapshotOf !== null && has("VDI_REVERT")) items.push({ action: "revert", label: `Revert “${volume.snapshotOf.name}” to this snapshot…` });
  items.push({ action: "copy", label: "Copy to another SR…" });
  items.push({ action: "download", label: "Download…" });
  items.push({ action: "rename", label: "Rename / description…" });
  items.push({ action: "keys", label: "Keys…" });
  if (has("VDI_CONFIG_CBT")) items.push({ action: "cbt", label: volume.cbtEnabled ? "Turn CBT off" : "Turn CBT on" });
  if (has("VDI_DELETE")) items.push({ action: "destroy", label: "Destroy…", danger: true });
  return items;
}

export function VolumeActionsMenu({
  anchor,
  volume,
  features,
  onAction,
  onClose,
}: {
  anchor: HTMLElement;
  volume: TVolumeRow;
  features: readonly string[];
  onAction: (action: VolumeAction) => void;
  onClose: () => void;
}) {
  const ref = useRef<HTMLDivElement>(null);
  const [position, setPosition] = useState<{ top: number; left: number } | null>(null);
  const items = actionsFor(volume, features);
  const access = useAccess();
  const menuId = useId();
  const denied = (action: VolumeAction): string | undefined => {
    if (action === "details") return undefined;
    if (access === undefined) return "Checking what your role allows…";
    return verdict(access, ITEM_ACTIONS[action]).reason;
  };
  const onCloseRef = useRef(onClose);
  useEffect(() => {
    onCloseRef.current = onClose;
  });

  useLayoutEffect(() => {
    const menu = ref.current;
    if (menu === null) return;
    menu.showPopover();
    // Beside its button, also while the table or the page scrolls (a scroll must not close it: a click
    // that first scrolls its button into view would lose its menu); gone with its button.
    const place = () => {
      if (!anchor.isConnected) return onCloseRef.current();
      const rect = anchor.getBoundingClientRect();
      const { offsetWidth: width, offsetHeight: height } = menu;
      const below = rect.bottom + 4 + height <= window.innerHeight;
      setPosition({
        top: below ? rect.bottom + 4 : Math.max(8, rect.top - 4 - height),
        left: Math.min(Math.max(8, rect.right - width), window.innerWidth - width - 8),
      });
    };
    place();
    menu.querySelector<HTMLElement>('[role="menuitem"]')?.focus();
    window.addEventListener("scroll", place, { capture: true, passive: true });
    window.addEventListener("resize", place);
    return () => {
      window.removeEventListener("scroll", place, { capture: true });
      window.removeEventListener("resize", place);
    };
  }, [anchor]);

  useEffect(() => {
    const menu = ref.current;
    return () => {
      // Back to the button that opened it, if it is still on the page (a virtualized row may be gone).
      if (menu?.contains(document.activeElement) && anchor.isConnected) anchor.focus();
    };
  }, [anchor]);

  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    const entries = [...(ref.current?.querySelectorAll<HTMLElement>('[role="menuitem"]') ?? [])];
    const at = entries.indexOf(document.activeElement as HTMLElement);
    const move = (to: number) => {
      event.preventDefault();
      entries[(to + entries.length) % entries.length]?.focus();
    };
    if (event.key === "ArrowDown") move(at + 1);
    else if (event.key === "ArrowUp") move(at - 1);
    else if (event.key === "Home") move(0);
    else if (event.key === "End") move(entries.length - 1);
    else if (event.key === "Tab") {
      event.preventDefault();
      onClose();
    }
  }

  return (
    <div
      ref={ref}
      popover="auto"
      role="menu"
      aria-label={actionsLabel(volume)}
      onToggle={(event) => {
        if (event.newState === "closed") onClose();
      }}
      onKeyDown={onKeyDown}
      style={{ position: "fixed", inset: "auto", margin: 0, top: position?.top ?? -9999, left: position?.left ?? -9999 }}
      className="min-w-56 rounded-lg border border-zinc-200 bg-white p-1 text-sm text-zinc-900 shadow-lg dark:border-zinc-700 dark:bg-zinc-900 dark:text-zinc-100"
    >
      {items.map((item) => {
        const reason = denied(item.action);
        // Kept in the menu and in its keyboard order, saying why: what a role cannot do is shown, not hidden.
        return (
          <button
            key={item.action}
            type="button"
            role="menuitem"
            tabIndex={-1}
            aria-disabled={reason === undefined ? undefined : "true"}
            aria-describedby={reason === undefined ? undefined : `${menuId}-${item.action}`}
            onClick={() => reason === undefined && onAction(item.action)}
            className={cn(
              "flex w-full flex-col items-start rounded-md px-2.5 py-1.5 text-left outline-none hover:bg-zinc-100 focus-visible:bg-zinc-100 dark:hover:bg-zinc-800 dark:focus-visible:bg-zinc-800",
              item.danger && "text-red-700 dark:text-red-400",
              reason !== undefined && "cursor-not-allowed opacity-60",
            )}
          >
            <span>{item.label}</span>
            {reason === undefined ? null : (
              <span id={`${menuId}-${item.action}`} className="text-xs text-zinc-500 dark:text-zinc-400">
                {reason}
              </span>
            )}
          </button>
        );
      })}
    </div>
  );
}
