// The one table a bench suite prints: each row is a measure of ours next to a baseline measured in the same
// run, the ratio ours/baseline, and the target with whether it is met.

export interface Row {
  /** What is measured, e.g. "seq read, file SR volume". */
  measure: string;
  ours: string;
  /** The baseline's value and what it is, e.g. "1450 MB/s qemu-nbd". */
  baseline: string;
  /** ours / baseline (null: not measured). */
  ratio: number | null;
  /** e.g. "≥ 0.9×", "< 1000 ms"; "" when the row has no target. */
  target: string;
  /** null: no target, or not measured. */
  met: boolean | null;
  note?: string;
}

/** A row that could not be measured (e.g. a plugin is missing), with the reason in its note. */
export function unavailableRow(measure: string, target: string, why: string): Row {
  return { measure, ours: "not available", baseline: "", ratio: null, target, met: null, note: why };
}

const HEADERS = ["Measure", "Ours", "Baseline", "Ratio", "Target", "Met", "Notes"] as const;

export function renderTable(title: string, rows: readonly Row[]): string {
  const cells = rows.map((row) => [
    row.measure,
    row.ours,
    row.baseline,
    row.ratio === null ? "—" : `${row.ratio.toFixed(2)}×`,
    row.target || "—",
    row.met === null ? "—" : row.met ? "yes" : "NO",
    row.note ?? "",
  ]);
  const widths = HEADERS.map((header, column) => Math.max(header.length, ...cells.map((line) => line[column]!.length)));
  const line = (values: readonly string[]) => `| ${values.map((value, column) => value.padEnd(widths[column]!)).join(" | ")} |`;
  const rule = `|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`;
  return [title, "", line(HEADERS), rule, ...cells.map(line)].join("\n");
}
