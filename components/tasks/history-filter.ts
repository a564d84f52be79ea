/** The task history's status filter; a plain module so the server page can read ?status= with it. */
export const HISTORY_FILTERS = ["all", "succeeded", "failed", "cancelled", "interrupted"] as const;
export type HistoryFilter = (typeof HISTORY_FILTERS)[number];
