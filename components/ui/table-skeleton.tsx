import { cn } from "./cn.ts";
import { ColGroup } from "./col-group.tsx";
import { Skeleton } from "./skeleton.tsx";
import { SkeletonGroup } from "./skeleton-group.tsx";

/** The header cells of the console's list tables, shared with their skeletons. */
export const tableHeadClasses = "px-4 py-2.5 text-left text-xs font-medium tracking-wide text-zinc-500 uppercase dark:text-zinc-400";

export interface SkeletonColumn {
  /** The header the real table shows. */
  label: string;
  /** Placeholder lines in the cell, by their size classes (e.g. "h-5 w-40"), stacked top to bottom. */
  lines: string[];
  /** On the header and the cell alike, e.g. a column shown only from xl. */
  className?: string;
}

export interface TableSkeletonProps {
  /** What is loading, in words, for screen readers. */
  label: string;
  columns: SkeletonColumn[];
  /** The real table's column widths (see ColGroup), so nothing moves when the data arrives. */
  columnWidths: string[];
  /** Placeholder rows, and cards below lg where the list is shown as cards. */
  rows: number;
  /** A placeholder card's height class, that of a real card. */
  cardHeight: string;
}

/** A list's loading frame: a table of placeholder rows on wide screens, placeholder cards on narrow ones. */
export function TableSkeleton({ label, columns, columnWidths, rows, cardHeight }: TableSkeletonProps) {
  const keys = Array.from({ length: rows }, (_, row) => row);
  return (
    <SkeletonGroup label={label}>
      <div aria-hidden="true" className="hidden rounded-xl border border-zinc-200 bg-white shadow-xs lg:block dark:border-zinc-800 dark:bg-zinc-900/60">
        <table className="w-full table-fixed text-sm">
          <ColGroup widths={columnWidths} />
          <thead className="border-b border-zinc-200 dark:border-zinc-800">
            <tr>
              {columns.map((column, index) => (
                <th key={index} className={cn(tableHeadClasses, column.className)}>
                  {column.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody className="divide-y divide-zinc-200 dark:divide-zinc-800">
            {keys.map((row) => (
              <tr key={row}>
                {columns.map((column, index) => (
                  <td key={index} className={cn("px-4 py-3", column.className)}>
                    {column.lines.map((line, n) => (
                      <Skeleton key={n} className={cn(n > 0 && "mt-1.5", line)} />
                    ))}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <div aria-hidden="true" className="flex flex-col gap-3 lg:hidden">
        {keys.map((card) => (
          <Skeleton key={card} className={cn(cardHeight, "rounded-xl")} />
        ))}
      </div>
    </SkeletonGroup>
  );
}
