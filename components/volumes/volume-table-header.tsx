"use client";

import { useVerdict } from "@/components/access/use-verdict.tsx";
import { Button } from "@/components/ui/button.tsx";

export interface VolumeTableHeaderProps {
  headingId: string;
  /** "12 volumes", "3 of 12 volumes"; null while the list loads. */
  count: string | null;
  /** How many volumes are selected for compare (two at most). */
  selectedCount: number;
  canCreate: boolean;
  onCompare: () => void;
  onCreate: () => void;
}

/** The volume table's title, its count (announced as the filter narrows it), Compare and Create. */
export function VolumeTableHeader({ headingId, count, selectedCount, canCreate, onCompare, onCreate }: VolumeTableHeaderProps) {
  const creating = useVerdict("volumes.create");
  return (
    <div className="flex flex-wrap items-end justify-between gap-3">
      <div>
        <h2 id={headingId} className="text-base font-semibold tracking-tight text-zinc-950 dark:text-white">
          Volumes
        </h2>
        <p className="min-h-5 text-sm text-zinc-600 tabular-nums dark:text-zinc-400" aria-live="polite">
          {count ?? ""}
        </p>
      </div>
      <div className="flex flex-wrap items-center gap-2">
        <Button variant="secondary" disabled={selectedCount !== 2} onClick={onCompare} title={selectedCount === 2 ? undefined : "Select two volumes to compare"}>
          Compare{selectedCount > 0 ? ` (${selectedCount} of 2)` : ""}
        </Button>
        <Button onClick={onCreate} disabled={!canCreate} deniedReason={creating.reason}>
          Create volume
        </Button>
      </div>
    </div>
  );
}
