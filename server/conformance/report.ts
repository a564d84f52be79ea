// The lines a conformance run prints: one per check as it ends, then the counts.
import type { CheckResult } from "./check.ts";

export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
  notes: number;
}

export function formatResult(result: Pick<CheckResult, "name" | "status" | "reason">): string {
  switch (result.status) {
    case "passed":
      return `✓ ${result.name}`;
    case "failed":
      return `✗ ${result.name} — ${result.reason ?? "failed"}`;
    case "skipped":
      return `- ${result.name} (skipped: ${result.reason ?? "not applicable"})`;
    case "note":
      return `! ${result.name} — ${result.reason ?? "note"}`;
  }
}

export function countResults(results: readonly CheckResult[]): Counts {
  const count = (status: CheckResult["status"]) => results.filter((r) => r.status === status).length;
  return { passed: count("passed"), failed: count("failed"), skipped: count("skipped"), notes: count("note") };
}

export function formatSummary(counts: Counts): string {
  return `${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped, ${counts.notes} note${counts.notes === 1 ? "" : "s"}`;
}
