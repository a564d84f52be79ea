// A conformance check: a named function with what it needs to be meaningful. The runner skips it when the
// plugins lack its features or the run lacks what it needs, and reports which.
import type { MethodName } from "../storage/interface.ts";
import type { CheckContext } from "./context.ts";

/**
 * sr: the SR the suite attached; datapath: a datapath plugin chosen with --datapath;
 * data: a datapath plugin that implements Data.*.
 */
export type Need = "sr" | "datapath" | "data";

export interface Check {
  readonly name: string;
  /** Features the volume plugin or the chosen datapath plugin must have, declared or derived (no /N suffix). */
  readonly features: readonly string[];
  /** Methods no feature gates: when the plugin answers Unimplemented, the check is skipped, not failed. */
  readonly optional: readonly MethodName[];
  readonly needs: readonly Need[];
  /** Why a failure is only a note: the toolstack never lets the plugin meet the situation the check sets up. */
  readonly advisory: string | undefined;
  run(t: CheckContext): Promise<void>;
}

export interface Requirements {
  features?: readonly string[];
  optional?: readonly MethodName[];
  needs?: readonly Need[];
  advisory?: string;
}

export function check(name: string, requirements: Requirements, run: (t: CheckContext) => Promise<void>): Check {
  const { features = [], optional = [], needs = [], advisory } = requirements;
  return { name, features, optional, needs, advisory, run };
}

/** note: an advisory check found the plugin at odds with the spec where the toolstack shields it. */
export type CheckStatus = "passed" | "failed" | "skipped" | "note";

export interface CheckResult {
  name: string;
  status: CheckStatus;
  /** Why it failed, was skipped or made a note. */
  reason?: string;
  durationMs: number;
}
