import { createColumnHelper } from "@tanstack/react-table";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";

export const ROW_HEIGHT = 52;
export const HEADER_HEIGHT = 40;
/** The scroll box's height whatever the data: no layout shift when rows arrive. */
export const BODY_HEIGHT = "h-[30rem]";

const column = createColumnHelper<TVolumeRow>();

/** The original's name on a snapshot, "" on a volume that is not one. */
export function snapshotOfLabel(volume: TVolumeRow): string {
  if (!volume.isSnapshot) return "";
  return volume.snapshotOf?.name ?? "(original gone)";
}

/** The volume table's columns, in order; those with a text header sort (VolumeRow draws the cells). */
export const volumeColumns = [
  column.display({ id: "select", header: () => <span className="sr-only">Select for compare</span> }),
  column.accessor("name", { header: "Name", sortingFn: "text" }),
  column.accessor("virtualSize", { header: "Size" }),
  column.accessor("physicalUtilisation", { header: "Used" }),
  column.accessor(snapshotOfLabel, { id: "snapshotOf", header: "Snapshot of", sortingFn: "text" }),
  column.accessor("cbtEnabled", { header: "CBT", sortingFn: "basic" }),
  column.accessor("uuid", { header: "UUID", sortingFn: "text" }),
  column.display({ id: "actions", header: () => <span className="sr-only">Actions</span> }),
];

/** The widths of the columns above, as classes for ColGroup. */
export const volumeColumnWidths = ["w-10", "", "w-24", "w-24", "w-40", "w-16", "w-44", "w-14"];
