import { Field, inputClasses, selectClasses } from "@/components/ui/field.tsx";
import { HISTORY_FILTERS, type HistoryFilter } from "./history-filter.ts";

export interface HistoryFiltersProps {
  filter: HistoryFilter;
  text: string;
  onFilter: (filter: HistoryFilter) => void;
  onText: (text: string) => void;
}

/** The history's status and text filters (the toolstack applies them; the text is sent once typing pauses). */
export function HistoryFilters({ filter, text, onFilter, onText }: HistoryFiltersProps) {
  return (
    <div className="grid grid-cols-1 gap-3 sm:w-auto sm:grid-cols-[10rem_16rem]">
      <Field label="Status">
        {(id) => (
          <select id={id} className={selectClasses} value={filter} onChange={(e) => onFilter(e.target.value as HistoryFilter)}>
            {HISTORY_FILTERS.map((value) => (
              <option key={value} value={value}>
                {value === "all" ? "All" : value[0]!.toUpperCase() + value.slice(1)}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Search">
        {(id) => <input id={id} type="search" maxLength={200} className={inputClasses} value={text} placeholder="Call, volume or SR name" onChange={(e) => onText(e.target.value)} />}
      </Field>
    </div>
  );
}
