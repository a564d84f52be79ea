import { cn } from "@/components/ui/cn.ts";
import { inputClasses } from "@/components/ui/field.tsx";

/** The table's filter, and a status while a menu action without a dialog (snapshot, CBT) runs. */
export function VolumeFilter({ value, onChange, busy }: { value: string; onChange: (value: string) => void; busy: boolean }) {
  return (
    <div className="flex flex-wrap items-center gap-2">
      <input
        type="search"
        aria-label="Filter volumes by name, uuid or description"
        placeholder="Filter by name, uuid or description"
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className={cn(inputClasses, "max-w-sm flex-1")}
      />
      {busy ? (
        <span role="status" className="text-sm text-zinc-600 dark:text-zinc-400">
          Working…
        </span>
      ) : null}
    </div>
  );
}
