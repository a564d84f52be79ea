"use client";

// Volume.compare of two volumes drawn as a block map: one square per group of blocks, coloured by how much
// of the group differs; the counts are also given in words for screen readers.
import { useQuery } from "@tanstack/react-query";
import { useMemo } from "react";
import { formatBytes, formatPercent } from "@/lib/format.ts";
import { useTRPC } from "@/components/trpc/trpc-provider.tsx";
import { Dialog } from "@/components/ui/dialog.tsx";
import { FormButtons } from "@/components/ui/form-buttons.tsx";
import { QueryError } from "@/components/ui/query-state.tsx";
import { Skeleton } from "@/components/ui/skeleton.tsx";
import { SkeletonGroup } from "@/components/ui/skeleton-group.tsx";
import type { TCompareVolumesResponse, TVolumeRow } from "@/server/api/volumes/schema.ts";

const COLUMNS = 64;
const MAX_CELLS = COLUMNS * 32;
const CELL = 10;
const GAP = 2;

/** Per cell, the fraction of its blocks that differ (0 = same, 1 = all changed). */
export function cellFractions(result: TCompareVolumesResponse, cells: number, perCell: number): Float64Array {
  const changed = new Float64Array(cells);
  for (const [start, length] of result.ranges) {
    let block = start;
    const end = Math.min(start + length, result.totalBlocks);
    while (block < end) {
      const cell = Math.floor(block / perCell);
      const cellEnd = Math.min((cell + 1) * perCell, end);
      changed[cell]! += cellEnd - block;
      block = cellEnd;
    }
  }
  for (let cell = 0; cell < cells; cell++) {
    const size = Math.min(perCell, result.totalBlocks - cell * perCell);
    changed[cell] = size > 0 ? changed[cell]! / size : 0;
  }
  return changed;
}

function tone(fraction: number): string {
  if (fraction === 0) return "fill-zinc-200 dark:fill-zinc-700";
  if (fraction < 0.5) return "fill-amber-400 dark:fill-amber-500";
  return "fill-red-600 dark:fill-red-500";
}

function BlockMap({ result, names }: { result: TCompareVolumesResponse; names: [string, string] }) {
  const { cells, perCell, fractions } = useMemo(() => {
    const perCell = Math.max(1, Math.ceil(result.totalBlocks / MAX_CELLS));
    const cells = Math.max(1, Math.ceil(result.totalBlocks / perCell));
    return { cells, perCell, fractions: cellFractions(result, cells, perCell) };
  }, [result]);
  const rows = Math.ceil(cells / COLUMNS);
  const width = COLUMNS * (CELL + GAP) - GAP;
  const height = rows * (CELL + GAP) - GAP;
  const summary = `${result.changedBlocks.toLocaleString()} of ${result.totalBlocks.toLocaleString()} blocks differ (${formatBytes(result.changedBlocks * result.blocksize)} of ${formatBytes(result.totalBlocks * result.blocksize)}, ${formatPercent(result.totalBlocks === 0 ? 0 : result.changedBlocks / result.totalBlocks)}).`;
  return (
    <figure className="flex flex-col gap-3">
      <svg
        role="img"
        aria-label={`Block map of “${names[0]}” against “${names[1]}”: ${summary}`}
        viewBox={`0 0 ${width} ${height}`}
        className="h-auto w-full"
        preserveAspectRatio="xMinYMin meet"
      >
        {Array.from(fractions, (fraction, cell) => (
          <rect key={cell} x={(cell % COLUMNS) * (CELL + GAP)} y={Math.floor(cell / COLUMNS) * (CELL + GAP)} width={CELL} height={CELL} rx={1.5} className={tone(fraction)} />
        ))}
      </svg>
      <ul className="flex flex-wrap gap-x-4 gap-y-1 text-xs text-zinc-600 dark:text-zinc-400" aria-label="Legend">
        <li className="flex items-center gap-1.5">
          <span aria-hidden="true" className="size-3 rounded-sm bg-zinc-200 dark:bg-zinc-700" /> Same
        </li>
        <li className="flex items-center gap-1.5">
          <span aria-hidden="true" className="size-3 rounded-sm bg-amber-400 dark:bg-amber-500" /> Partly different
        </li>
        <li className="flex items-center gap-1.5">
          <span aria-hidden="true" className="size-3 rounded-sm bg-red-600 dark:bg-red-500" /> Mostly or all different
        </li>
      </ul>
      <figcaption className="text-sm text-zinc-700 dark:text-zinc-300">
        <p>{summary}</p>
        <p className="mt-1 text-xs text-zinc-500 dark:text-zinc-400">
          Each square is {perCell.toLocaleString()} block{perCell === 1 ? "" : "s"} of {formatBytes(result.blocksize)} ({formatBytes(perCell * result.blocksize)}), in
          disk order, left to right.
        </p>
      </figcaption>
    </figure>
  );
}

export function CompareDialog({ srRef, volumes, onClose }: { srRef: string; volumes: [TVolumeRow, TVolumeRow]; onClose: () => void }) {
  const trpc = useTRPC();
  const [a, b] = volumes;
  const compare = useQuery(trpc.volumes.compare.queryOptions({ srRef, a: a.key, b: b.key }, { staleTime: 0 }));
  return (
    <Dialog
      open
      onClose={onClose}
      title="Compare volumes"
      description={
        <>
          Blocks of “{a.name}” that differ from “{b.name}”, as the SR&apos;s plugin reports them.
        </>
      }
      className="sm:max-w-2xl"
    >
      {compare.data ? (
        <BlockMap result={compare.data} names={[a.name, b.name]} />
      ) : compare.isError ? (
        <QueryError error={compare.error} what="the comparison" onRetry={() => void compare.refetch()} />
      ) : (
        <SkeletonGroup label="Comparing…" className="flex flex-col gap-3">
          <Skeleton className="aspect-[16/6] w-full" />
          <Skeleton className="h-4 w-2/3" />
        </SkeletonGroup>
      )}
      <FormButtons cancelLabel="Close" onCancel={onClose} />
    </Dialog>
  );
}
