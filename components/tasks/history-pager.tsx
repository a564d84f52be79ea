import { Button } from "@/components/ui/button.tsx";

export interface HistoryPagerProps {
  /** 0-based. */
  page: number;
  pages: number;
  onPage: (page: number) => void;
}

/** Newer and older pages of the history (a day of tasks can be 100,000: the toolstack sends one page at a time). */
export function HistoryPager({ page, pages, onPage }: HistoryPagerProps) {
  if (pages <= 1) return null;
  return (
    <nav aria-label="History pages" className="flex items-center justify-center gap-3">
      <Button variant="secondary" size="sm" disabled={page === 0} onClick={() => onPage(page - 1)}>
        Newer
      </Button>
      <span className="text-sm text-zinc-600 tabular-nums dark:text-zinc-400">
        Page {(page + 1).toLocaleString("en")} of {pages.toLocaleString("en")}
      </span>
      <Button variant="secondary" size="sm" disabled={page >= pages - 1} onClick={() => onPage(page + 1)}>
        Older
      </Button>
    </nav>
  );
}
