import type { MouseEvent, ReactNode } from "react";
import { formatBytes } from "@/lib/format.ts";
import { Badge } from "@/components/ui/badge.tsx";
import { Button } from "@/components/ui/button.tsx";
import { cn } from "@/components/ui/cn.ts";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { actionsLabel } from "./volume-actions-menu.tsx";
import { ROW_HEIGHT, snapshotOfLabel } from "./volume-columns.tsx";

export interface VolumeRowProps {
  volume: TVolumeRow;
  /** The row's place in the whole sorted list (only the rows in view are in the DOM). */
  index: number;
  selected: boolean;
  menuOpen: boolean;
  onToggleSelected: () => void;
  onMenuButton: (event: MouseEvent<HTMLButtonElement>) => void;
}

/** One volume in the table: its compare checkbox, its figures, and the button of its actions menu. */
export function VolumeRow({ volume, index, selected, menuOpen, onToggleSelected, onMenuButton }: VolumeRowProps) {
  return (
    <tr
      aria-rowindex={index + 2}
      style={{ height: ROW_HEIGHT }}
      className={cn("group", selected ? "bg-sky-50 dark:bg-sky-950" : "hover:bg-zinc-50 dark:hover:bg-zinc-800")}
    >
      <Cell className="text-center">
        <input
          type="checkbox"
          aria-label={`Select ${volume.name}${volume.isSnapshot ? " (snapshot)" : ""} for compare`}
          checked={selected}
          onChange={onToggleSelected}
          className="size-4 accent-sky-600"
        />
      </Cell>
      <Cell>
        <div className="flex min-w-0 items-center gap-1.5">
          <span className="truncate font-medium text-zinc-900 dark:text-zinc-100" title={volume.name}>
            {volume.name || "(no name)"}
          </span>
          {volume.isSnapshot ? <Badge tone="info">Snapshot</Badge> : null}
          {volume.volumeType === "CBT_Metadata" ? <Badge tone="warning">CBT metadata only</Badge> : null}
        </div>
        <div className="truncate text-xs text-zinc-500 dark:text-zinc-400" title={volume.description || undefined}>
          {/* On a narrow screen the size columns are off to the side: the size comes along here. */}
          <span className="sm:hidden">
            {formatBytes(volume.virtualSize)}
            {volume.description ? " · " : ""}
          </span>
          {volume.description}
        </div>
      </Cell>
      <Cell className="text-right tabular-nums">{formatBytes(volume.virtualSize)}</Cell>
      <Cell className="text-right tabular-nums text-zinc-600 dark:text-zinc-400">{formatBytes(volume.physicalUtilisation)}</Cell>
      <Cell className="truncate text-zinc-600 dark:text-zinc-400">
        <span title={snapshotOfLabel(volume)}>{snapshotOfLabel(volume) || <span aria-label="Not a snapshot">—</span>}</span>
      </Cell>
      <Cell>{volume.cbtEnabled ? <Badge tone="success">On</Badge> : <span className="text-zinc-500 dark:text-zinc-400">Off</span>}</Cell>
      <Cell className="truncate font-mono text-xs text-zinc-600 dark:text-zinc-400">
        <span title={volume.uuid}>{volume.uuid}</span>
      </Cell>
      <Cell className={cn("sticky right-0 text-right", selected ? "bg-sky-50 dark:bg-sky-950" : "bg-white group-hover:bg-zinc-50 dark:bg-zinc-900 dark:group-hover:bg-zinc-800")}>
        <Button size="sm" variant="ghost" aria-label={actionsLabel(volume)} aria-haspopup="menu" aria-expanded={menuOpen} onClick={onMenuButton}>
          <span aria-hidden="true" className="text-base leading-none">
            ⋯
          </span>
        </Button>
      </Cell>
    </tr>
  );
}

function Cell({ className, children }: { className?: string; children: ReactNode }) {
  return <td className={cn("border-b border-zinc-100 px-3 align-middle dark:border-zinc-800/70", className)}>{children}</td>;
}
