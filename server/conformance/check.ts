// A conformance check: a named function with what it needs to be meaningful. The runner skips it when the
// plugins do not declare its features or the run lacks what it needs, and reports which.
import type { MethodName } from "../storage/interface.ts";
import type { CheckContext } from "./context.ts";

/**
 * sr: the SR the suite attached; datapath: a datapath plugin chosen with --datapath;
 * data: a datapath plugin that implements Data.*.
 */
export type Need = "sr" | "datapath" | "data";

export interface Check {
  readonly name: string;
  /** Features the volume plugin or the chosen datapath plugin must declare (without any /N suffix). */
  readonly features: readonly string[];
  /** Methods no feature gates: when the plugin answers Unimplemented, the check is skipped, not failed. */
  readonly optional: readonly MethodName[];
  readonly needs: readonly Need[];
  run(t: CheckContext): Promise<void>;
}

export interface Requirements {
  features?: readonly string[];
  optional?: readonly MethodName[];
  needs?: readonly Need[];
}

export function check(name: string, requirements: Requirements, run: (t: CheckContext) => Promise<void>): Check {
  return { name, features: requirements.features ?? [], optional: requirements.optional ?? [], needs: requirements.needs ?? [], run };
}

export type CheckStatus = "passed" | "failed" | "skipped";

export interface CheckResult {
  name: string;
  status: CheckStatus;
  /** Why it failed or was skipped. */
  reason?: string;
  durationMs: number;
}
