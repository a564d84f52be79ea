// The fuzz suite's shared part (issue 22): each `*.fuzz.ts` target is a node:test test that runs a fast-check
// property through `fuzz()`, seeded and bounded. By default (`npm test`) a short deterministic slice runs;
// HANGAR_FUZZ=full (`npm run fuzz`) runs each target up to its full budget. HANGAR_FUZZ_SEED replays a run (the
// seed and the counterexample's path are in a failure's report). Every target prints one line: its cases,
// failures, time and peak RSS.
import type { TestContext } from "node:test";
import fc from "fast-check";
import { XenDouble, type XenValue } from "./xenapi/values.ts";

export const FUZZ_FULL = process.env.HANGAR_FUZZ === "full";

/** Issue 22's number: any fixed seed makes the slice deterministic. */
const DEFAULT_SEED = 22;

function seedFromEnv(): number {
  const text = process.env.HANGAR_FUZZ_SEED;
  if (text === undefined || text === "") return DEFAULT_SEED;
  const seed = Number(text);
  if (!Number.isSafeInteger(seed)) throw new Error(`HANGAR_FUZZ_SEED must be an integer (got ${text})`);
  return seed;
}

export const FUZZ_SEED = seedFromEnv();

/** Every case ends with the process's RSS under this (HANGAR_FUZZ_MAX_RSS_MIB): a leak or a buffer sized by the input shows here. */
const MAX_RSS = Number(process.env.HANGAR_FUZZ_MAX_RSS_MIB || 1024) * 1024 * 1024;

export interface FuzzBudget {
  /** Cases of the short slice (`npm test`). */
  slice: number;
  /** Cases at most of a full run (`npm run fuzz`), and the time it may take (the run stops there, as a success). */
  full: number;
  fullSeconds: number;
  /** How long one case may take: longer is a hang, a failure. */
  caseMs: number;
}

/** `promise`, or a failure once `ms` have passed: for the waits inside a case (the case's own bound is fuzz()'s). */
export function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Runs `check` on values of `arbitrary` (the slice's or the full run's number of cases, from the seed): each case
 * must return (a success, or a clean error the check itself caught) within the budget's bound with the RSS under
 * its bound. A failure is shrunk by fast-check and thrown with the seed and path that replay it.
 */
export async function fuzz<T>(t: TestContext, target: string, budget: FuzzBudget, arbitrary: fc.Arbitrary<T>, check: (value: T) => Promise<void> | void): Promise<void> {
  let peakRss = 0;
  const property = fc.asyncProperty(arbitrary, async (value) => {
    const started = performance.now();
    await check(value);
    // The timeout plugin cannot stop a synchronous hang; a slow one that ends is caught here.
    const took = performance.now() - started;
    if (took > budget.caseMs) throw new Error(`the case took ${took.toFixed(0)} ms, more than ${budget.caseMs}`);
    const rss = process.memoryUsage().rss;
    peakRss = Math.max(peakRss, rss);
    if (rss > MAX_RSS) throw new Error(`RSS ${mib(rss)} after the case, more than ${mib(MAX_RSS)}`);
  });
  const started = performance.now();
  const details = await fc.check(property, {
    seed: FUZZ_SEED,
    numRuns: FUZZ_FULL ? budget.full : budget.slice,
    includeErrorInReport: true,
    plugins: [fc.timeout(budget.caseMs), ...(FUZZ_FULL ? [fc.interruptAfterTimeLimit(budget.fullSeconds * 1000)] : [])],
  });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  t.diagnostic(`fuzz ${target}: seed ${details.seed}, ${details.numRuns} cases, ${details.failed ? 1 : 0} failures${details.failed ? ` (${details.numShrinks} shrinks)` : ""}, ${seconds} s, peak RSS ${mib(peakRss)}`);
  if (details.failed) throw new Error(`fuzz ${target}: ${fc.defaultReportMessage(details)}`);
}

const mib = (bytes: number) => `${Math.round(bytes / 1024 / 1024)} MiB`;

// ---- XenAPI values, for every target that feeds records or parameters ----

/** Strings the code under test reads as more than text: references, numbers, dates, names objects have. */
const meaningfulString = fc.oneof(
  fc.nat({ max: 12 }).map((n) => `Ref:${n}`),
  fc.constantFrom("OpaqueRef:NULL", "OpaqueRef:5e7b7b4e-0000-4000-8000-000000000000", "Ref:", "Ref:-1", "Ref:1/../2"),
  fc.oneof(fc.integer(), fc.maxSafeInteger(), fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n })).map(String),
  fc.constantFrom("", " ", "-0", "1e400", "0x10", "NaN", "Infinity", "+5", "1.5", "9007199254740993", "20261123T10:08:00Z", "true", "Disk", "CD", "iso", "user", "__proto__", "constructor"),
);

export const xenString: fc.Arbitrary<string> = fc.oneof(meaningfulString, fc.string({ unit: "binary", maxLength: 40 }), fc.string({ unit: "grapheme", maxLength: 12 }));

/** Any XenAPI value, small and shallow: strings of meaning, numbers, doubles, booleans, nil, lists and structs. */
export const xenValue: fc.Arbitrary<XenValue> = fc.letrec<{ value: XenValue; array: XenValue[]; struct: Record<string, XenValue> }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", maxDepth: 3, withCrossShrink: true },
    xenString,
    fc.oneof(fc.integer(), fc.maxSafeInteger()),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => new XenDouble(d)),
    fc.boolean(),
    fc.constant(null),
    tie("array"),
    tie("struct"),
  ),
  array: fc.array(tie("value"), { maxLength: 4 }),
  struct: fc.dictionary(xenString, tie("value"), { maxKeys: 4 }),
})).value;

/** A few edits of a text: ranges deleted, duplicated, or replaced by or given a fragment. Positions are taken modulo the text's length. */
export function editedText(text: fc.Arbitrary<string>, fragments: fc.Arbitrary<string>): fc.Arbitrary<string> {
  const edit = fc.record({ kind: fc.constantFrom("delete", "duplicate", "insert", "replace"), at: fc.nat(), length: fc.nat({ max: 64 }), fragment: fragments });
  return fc.tuple(text, fc.array(edit, { minLength: 1, maxLength: 4 })).map(([start, edits]) =>
    edits.reduce((s, { kind, at, length, fragment }) => {
      const from = at % (s.length + 1);
      const to = Math.min(s.length, from + length);
      if (kind === "delete") return s.slice(0, from) + s.slice(to);
      if (kind === "duplicate") return s.slice(0, to) + s.slice(from);
      if (kind === "insert") return s.slice(0, from) + fragment + s.slice(from);
      return s.slice(0, from) + fragment + s.slice(to);
    }, start),
  );
}
