import { flexRender, type Header } from "@tanstack/react-table";
import { cn } from "@/components/ui/cn.ts";
import type { TVolumeRow } from "@/server/api/volumes/schema.ts";

/** A column header of the volume table: a sort button where the column sorts, its state in aria-sort. */
export function SortableHeader({ header }: { header: Header<TVolumeRow, unknown> }) {
  const sorted = header.column.getIsSorted();
  const label = typeof header.column.columnDef.header === "string" ? header.column.columnDef.header : null;
  const numeric = header.id === "virtualSize" || header.id === "physicalUtilisation";
  return (
    <th
      scope="col"
      aria-sort={sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : undefined}
      className={cn(
        "border-b border-zinc-200 px-3 text-left text-xs font-medium text-zinc-600 dark:border-zinc-800 dark:text-zinc-400",
        numeric && "text-right",
        // The actions stay in view while a narrow screen scrolls the table sideways.
        header.id === "actions" && "sticky right-0 bg-zinc-50 dark:bg-zinc-900",
      )}
    >
      {label !== null && header.column.getCanSort() ? (
        <button
          type="button"
          aria-label={`Sort by ${label.toLowerCase()}`}
          onClick={header.column.getToggleSortingHandler()}
          className={cn(
            "inline-flex items-center gap-1 rounded px-1 py-0.5 align-middle hover:text-zinc-900 focus-visible:outline-2 focus-visible:outline-sky-600 dark:hover:text-white",
            // Numbers are right-aligned: the arrow goes left so the label lines up with them.
            numeric && "-mr-1 flex-row-reverse",
          )}
        >
          {label}
          <span aria-hidden="true" className="w-3 text-[10px]">
            {sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : ""}
          </span>
        </button>
      ) : (
        flexRender(header.column.columnDef.header, header.getContext())
      )}
    </th>
  );
}
