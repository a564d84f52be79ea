import type { Table } from "@tanstack/react-table";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useRef, type MouseEvent } from "react";
import { cn } from "@/components/ui/cn.ts";
import { ColGroup } from "@/components/ui/col-group.tsx";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";
import { SortableHeader } from "./sortable-header.tsx";
import { BODY_HEIGHT, HEADER_HEIGHT, ROW_HEIGHT, volumeColumnWidths } from "./volume-columns.tsx";
import { VolumeRow } from "./volume-row.tsx";

export interface VolumeGridProps {
  table: Table<TVolumeRow>;
  /** Said in the body when no row shows. */
  emptyText: string;
  /** Keys of the volumes selected for compare. */
  selected: string[];
  /** The volume whose actions menu is open. */
  menuUuid: string | undefined;
  onToggleSelected: (volume: TVolumeRow) => void;
  onMenuButton: (volume: TVolumeRow, event: MouseEvent<HTMLButtonElement>) => void;
}

/** The table itself, virtualized: only the rows in view are in the DOM, padding rows stand for the others. */
export function VolumeGrid({ table, emptyText, selected, menuUuid, onToggleSelected, onMenuButton }: VolumeGridProps) {
  const scrollRef = useRef<HTMLDivElement>(null);
  const rows = table.getRowModel().rows;
  // TanStack Virtual returns fresh functions each render; as with the table, nothing below is memoized.
  // eslint-disable-next-line react-hooks/incompatible-library
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 12,
    scrollPaddingStart: HEADER_HEIGHT,
  });
  const items = virtualizer.getVirtualItems();
  const paddingTop = items.length > 0 ? items[0]!.start : 0;
  const paddingBottom = items.length > 0 ? virtualizer.getTotalSize() - items.at(-1)!.end : 0;

  return (
    <div ref={scrollRef} className={cn(BODY_HEIGHT, "overflow-auto overscroll-contain")}>
      <table aria-rowcount={rows.length + 1} aria-label="Volumes" className="w-full min-w-[60rem] table-fixed border-separate border-spacing-0 text-sm">
        <ColGroup widths={volumeColumnWidths} />
        <thead className="sticky top-0 z-10 bg-zinc-50 dark:bg-zinc-900">
          {table.getHeaderGroups().map((group) => (
            <tr key={group.id} aria-rowindex={1} style={{ height: HEADER_HEIGHT }}>
              {group.headers.map((header) => (
                <SortableHeader key={header.id} header={header} />
              ))}
            </tr>
          ))}
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={8} className="px-3 py-10 text-center text-sm text-zinc-600 dark:text-zinc-400">
                {emptyText}
              </td>
            </tr>
          ) : null}
          <PaddingRow height={paddingTop} />
          {items.map((item) => {
            const volume = rows[item.index]!.original;
            return (
              <VolumeRow
                key={volume.uuid}
                volume={volume}
                index={item.index}
                selected={selected.includes(volume.key)}
                menuOpen={menuUuid === volume.uuid}
                onToggleSelected={() => onToggleSelected(volume)}
                onMenuButton={(event) => onMenuButton(volume, event)}
              />
            );
          })}
          <PaddingRow height={paddingBottom} />
        </tbody>
      </table>
    </div>
  );
}

/** The height of the rows scrolled out of the DOM, so the scroll bar stays true. */
function PaddingRow({ height }: { height: number }) {
  if (height <= 0) return null;
  return (
    <tr aria-hidden="true">
      <td colSpan={8} style={{ height, padding: 0 }} />
    </tr>
  );
}
