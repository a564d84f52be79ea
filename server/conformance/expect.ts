// How a check states what it expects. Every failure carries a one-line reason for the `✗ name — reason` line.
import { isDeepStrictEqual } from "node:util";
import { CALLER_CODES, type StorageError } from "../storage/errors.ts";
import type { MethodName } from "../storage/interface.ts";
import type { ErrorConstructor } from "../storage/types.ts";

/** The plugin broke a rule of the interface. */
export class Failure extends Error {}

/** The check cannot say anything about this plugin (a method it does not implement, a datapath it lacks). */
export class Skip extends Error {}

/** A plugin call that answered with an error; the check decides whether that was expected. */
export class CallFailed extends Error {
  readonly method: MethodName;
  readonly error: StorageError;

  constructor(method: MethodName, error: StorageError) {
    super(`${method} failed: ${error.message}`);
    this.method = method;
    this.error = error;
  }
}

const CALLER_CODE_SET: ReadonlySet<string> = new Set(Object.values(CALLER_CODES));

/** Short JSON of a value for a reason line. */
export function show(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 160 ? `${text.slice(0, 157)}...` : text;
}

export function expect(condition: boolean, reason: string): asserts condition {
  if (!condition) throw new Failure(reason);
}

/** On a mismatch, the reason names the first member that differs rather than printing both wholes. */
export function expectEqual(actual: unknown, expected: unknown, what: string): void {
  if (isDeepStrictEqual(actual, expected)) return;
  const { path, actual: got, expected: wanted } = firstDifference(actual, expected, "");
  throw new Failure(`${what}${path}: expected ${wanted}, got ${got}`);
}

function firstDifference(actual: unknown, expected: unknown, path: string): { path: string; actual: string; expected: string } {
  const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null;
  if (isRecord(actual) && isRecord(expected) && Array.isArray(actual) === Array.isArray(expected)) {
    for (const key of new Set([...Object.keys(expected), ...Object.keys(actual)])) {
      if (isDeepStrictEqual(actual[key], expected[key])) continue;
      const at = Array.isArray(expected) ? `${path}[${key}]` : `${path}.${/^[A-Za-z_][\w-]*$/.test(key) ? key : JSON.stringify(key)}`;
      if (!(key in actual)) return { path: at, actual: "nothing", expected: show(expected[key]) };
      if (!(key in expected)) return { path: at, actual: show(actual[key]), expected: "nothing" };
      return firstDifference(actual[key], expected[key], at);
    }
  }
  return { path, actual: show(actual), expected: show(expected) };
}

/**
 * Expects a call to fail with an error object of the plugin (not a crash or an unreadable answer); with
 * `constructor`, one whose params[0] names that error constructor of the interface.
 */
export async function expectError(call: Promise<unknown>, what: string, constructor?: ErrorConstructor): Promise<StorageError> {
  let outcome: unknown;
  try {
    outcome = await call;
  } catch (error) {
    if (!(error instanceof CallFailed)) throw error;
    const { code, params } = error.error;
    if (CALLER_CODE_SET.has(code)) throw new Failure(`${what}: expected an error object from the plugin, got ${error.error.message}`);
    if (constructor !== undefined && error.error.errorConstructor !== constructor) {
      throw new Failure(`${what}: expected ${constructor} as params[0], got ${code} ${show(params)}`);
    }
    return error.error;
  }
  throw new Failure(`${what} succeeded (answered ${show(outcome)}); expected ${constructor ?? "an error"}`);
}

/** The plugin does not have the method: no script for it, or the interface's Unimplemented error. */
export function isUnimplemented(error: StorageError): boolean {
  return error.code === CALLER_CODES.scriptMissing || error.errorConstructor === "Unimplemented";
}
