// What the console fuzz (console.fuzz.spec.ts) is made of: JSON as it travels (numbers JSON.stringify cannot
// write, `__proto__` keys, nesting too deep to build, text that is no JSON), edits of valid inputs, a
// fast-check runner for Playwright on the budget of the server-side fuzz (server/fuzz-testing.ts), and the
// checks between cases: the console answers a probe within a bound while a case runs, and its RSS stays bounded.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import type { APIRequestContext } from "@playwright/test";
import fc from "fast-check";
import { FUZZ_FULL, FUZZ_SEED, type FuzzBudget } from "../server/fuzz-testing.ts";
import { test } from "./fixtures.ts";

export { FUZZ_FULL, FUZZ_SEED, type FuzzBudget };

// ---- JSON as text ----

/** JSON text sent as it is: 1e400, -0, nesting 100 000 deep, or text that is no JSON at all. */
export class Raw {
  readonly text: string;
  readonly label: string | undefined;
  constructor(text: string, label?: string) {
    this.text = text;
    this.label = label;
  }
  [fc.toStringMethod](): string {
    return this.label ?? (this.text.length > 80 ? `Raw(${JSON.stringify(this.text.slice(0, 40))}… ${this.text.length} chars)` : `Raw(${JSON.stringify(this.text)})`);
  }
}

/** A JSON object as its entries: a `__proto__` key stays a key (as JSON.parse makes it), a duplicate key stays. */
export class JObj {
  readonly entries: readonly (readonly [string, J])[];
  constructor(entries: readonly (readonly [string, J])[]) {
    this.entries = entries;
  }
  [fc.toStringMethod](): string {
    return `{${this.entries.map(([key, value]) => `${JSON.stringify(key)}: ${fc.stringify(value)}`).join(", ")}}`;
  }
}

export type J = null | boolean | number | string | Raw | JObj | readonly J[];

/** A plain value (an input as the UI sends it, fc.jsonValue's) as J. */
export function toJ(value: unknown): J {
  if (value === null || typeof value === "boolean" || typeof value === "number" || typeof value === "string") return value;
  if (Array.isArray(value)) return value.map(toJ);
  if (typeof value === "object") return new JObj(Object.entries(value as object).filter(([, v]) => v !== undefined).map(([k, v]) => [k, toJ(v)] as const));
  throw new Error(`not JSON: ${String(value)}`);
}

export function jsonText(value: J): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof JObj) return `{${value.entries.map(([key, v]) => `${JSON.stringify(key)}:${jsonText(v)}`).join(",")}}`;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(",")}]`;
  // -0 and non-finite numbers (fc.jsonValue makes none, but -0) as JSON.stringify writes them.
  return JSON.stringify(value) ?? "null";
}

/** Every string in `value`, mapped (objects' keys too). */
export function mapStrings(value: J, map: (s: string) => string): J {
  if (typeof value === "string") return map(value);
  if (value instanceof Raw) return value;
  if (value instanceof JObj) return new JObj(value.entries.map(([key, v]) => [map(key), mapStrings(v, map)] as const));
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, map));
  return value;
}

// ---- generators ----

/** Header values Node and Playwright send: printable ASCII. */
export const headerText = (maxLength = 40) => fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength });

const rawNumbers = ["1e400", "-1e400", "-0", "1e-400", "9007199254740993", "-9007199254740993", "-1", "0.5", "1e21", "123456789012345678901234567890", "0", "NaN", "Infinity", "-Infinity", "0x10", "01"];

/** Strings code reads as more than text: refs, paths, names objects have, what a parser or a shell may take. */
export const weirdString = fc.constantFrom(
  "",
  " ",
  "\u0000",
  "\n",
  "OpaqueRef:NULL",
  "OpaqueRef:",
  "OpaqueRef:00000000-0000-4000-8000-000000000000",
  "OpaqueRef:../../x",
  "00000000-0000-4000-8000-000000000000",
  "../../../../etc/passwd",
  "/etc/passwd",
  "%2e%2e%2f",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "x".repeat(256),
  "x".repeat(4097),
  "\ud800",
  "😀".repeat(40),
  "nbd://127.0.0.1:1/x",
  "nbd+unix:///x?socket=/nonexistent.sock",
  "nbd:unix:/nonexistent.sock",
  "http://127.0.0.1:1/x.xva",
  "https://fuzz.invalid/vm.xva",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "$(touch /tmp/pwned)",
  "${7*7}",
  "1e400",
  "-1",
  "true",
  "null",
  "none",
  "zstd",
);

/** Values of the wrong kind, too big, too deep or poisonous, for any place of an input. */
export function weirdValue(options: { maxStringBytes: number; maxDepth: number }): fc.Arbitrary<J> {
  return fc.oneof(
    { arbitrary: fc.jsonValue({ maxDepth: 3 }).map(toJ), weight: 4 },
    { arbitrary: weirdString, weight: 4 },
    { arbitrary: fc.string({ unit: "binary", maxLength: 30 }), weight: 2 },
    { arbitrary: fc.constantFrom(...rawNumbers).map((text) => new Raw(text)), weight: 3 },
    { arbitrary: fc.oneof(fc.integer(), fc.double(), fc.constant(Number.MAX_SAFE_INTEGER + 2), fc.constant(-1), fc.constant(2 ** 64)), weight: 2 },
    { arbitrary: fc.constantFrom<J>(null, true, false, 0, [], new JObj([])), weight: 3 },
    {
      arbitrary: fc.integer({ min: 10_000, max: options.maxStringBytes }).map((n) => new Raw(`"${"a".repeat(n)}"`, `"a"×${n}`)),
      weight: 1,
    },
    {
      arbitrary: fc.tuple(fc.integer({ min: 100, max: options.maxDepth }), fc.boolean()).map(([depth, array]) =>
        array ? new Raw(`${"[".repeat(depth)}${"]".repeat(depth)}`, `[…] ${depth} deep`) : new Raw(`${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`, `{"a":…} ${depth} deep`),
      ),
      weight: 1,
    },
    {
      arbitrary: fc.constantFrom<J>(
        new Raw('{"__proto__":{"isAdmin":true,"polluted":"yes"}}'),
        new Raw('{"constructor":{"prototype":{"polluted":"yes"}}}'),
        new JObj([["__proto__", new JObj([["toString", 1], ["valueOf", "x"]])]]),
        new JObj([["toJSON", "x"], ["then", "x"]]),
      ),
      weight: 2,
    },
  );
}

export const poisonKey = fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "toString", "then", "toJSON", "", " ", "a".repeat(300), "ref", "sr", "srRef", "uuid", "name", "id"), fc.string({ maxLength: 8 }));

/** One edit of a value, at the `at`-th node (pre-order, modulo their count). */
export interface Edit {
  at: number;
  op: "replace" | "add" | "drop" | "wrap" | "duplicate";
  key: string;
  value: J;
}

export function editArbitrary(value: fc.Arbitrary<J>): fc.Arbitrary<Edit> {
  return fc.record({ at: fc.nat(), op: fc.constantFrom("replace", "replace", "add", "drop", "wrap", "duplicate"), key: poisonKey, value });
}

function countNodes(value: J): number {
  if (value instanceof JObj) return 1 + value.entries.reduce((n, [, v]) => n + countNodes(v), 0);
  if (Array.isArray(value)) return 1 + value.reduce((n: number, v: J) => n + countNodes(v), 0);
  return 1;
}

function editNode(node: J, edit: Edit): J {
  switch (edit.op) {
    case "replace":
      return edit.value;
    case "add":
      if (node instanceof JObj) return new JObj([...node.entries, [edit.key, edit.value]]);
      if (Array.isArray(node)) return [...node, edit.value];
      return edit.value;
    case "drop":
      if (node instanceof JObj && node.entries.length > 0) return new JObj(node.entries.filter((_, i) => i !== edit.at % node.entries.length));
      if (Array.isArray(node) && node.length > 0) return node.filter((_, i) => i !== edit.at % node.length);
      return edit.value;
    case "wrap":
      return edit.at % 2 === 0 ? [node] : new JObj([[edit.key, node]]);
    case "duplicate":
      if (node instanceof JObj && node.entries.length > 0) return new JObj([...node.entries, [node.entries[edit.at % node.entries.length]![0], edit.value]]);
      return edit.value;
  }
}

export function applyEdit(root: J, edit: Edit): J {
  const target = edit.at % countNodes(root);
  let index = 0;
  const walk = (node: J): J => {
    if (index++ === target) return editNode(node, edit);
    if (node instanceof JObj) return new JObj(node.entries.map(([key, v]) => [key, walk(v)] as const));
    if (Array.isArray(node)) return node.map(walk);
    return node;
  };
  return walk(root);
}

// ---- the console process: its RSS ----

/** The pid of the process listening on `port` (the console Playwright started), if it can be found. */
export function listenerPid(port: number): number | undefined {
  try {
    const out = execFileSync("ss", ["-ltnpH", `sport = :${port}`], { encoding: "utf8" });
    const match = /pid=(\d+)/.exec(out);
    return match === null ? undefined : Number(match[1]);
  } catch {
    return undefined;
  }
}

export function rssOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
    return kib === undefined ? undefined : Number(kib) * 1024;
  } catch {
    return undefined;
  }
}

export const mib = (bytes: number | undefined) => (bytes === undefined ? "unknown" : `${Math.round(bytes / 1024 / 1024)} MiB`);

/** The console's RSS after every case stays under this (HANGAR_FUZZ_MAX_RSS_MIB, as the server-side fuzz). */
const MAX_RSS = Number(process.env.HANGAR_FUZZ_MAX_RSS_MIB || 1024) * 1024 * 1024;
/** A probe (a cheap tRPC call) must be answered within this while a case runs and after it. */
export const PROBE_MS = Number(process.env.HANGAR_FUZZ_PROBE_MS || 1000);

/**
 * `work`, with a probe every 250 ms while it runs and one after: an anonymous `hosts.list`, answered (401) by
 * the console itself without the toolstack, within PROBE_MS each.
 */
export async function withProbes<T>(request: APIRequestContext, work: () => Promise<T>): Promise<{ result: T; slowestProbeMs: number }> {
  let slowest = 0;
  let failure: Error | undefined;
  const probe = async () => {
    const started = performance.now();
    try {
      const answer = await request.get("/api/trpc/hosts.list", { timeout: PROBE_MS * 5, failOnStatusCode: false });
      if (answer.status() !== 401) failure ??= new Error(`the probe got HTTP ${answer.status()}, not 401`);
    } catch (error) {
      failure ??= new Error(`the probe failed: ${(error as Error).message}`);
    }
    const took = performance.now() - started;
    slowest = Math.max(slowest, took);
    if (took > PROBE_MS) failure ??= new Error(`the probe took ${took.toFixed(0)} ms, more than ${PROBE_MS} ms`);
  };
  let done = false;
  const probing = (async () => {
    await new Promise((resolve) => setTimeout(resolve, 20));
    while (!done) {
      await probe();
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  let result: T;
  try {
    result = await work();
  } finally {
    done = true;
    await probing;
  }
  await probe();
  if (failure !== undefined) throw failure;
  return { result, slowestProbeMs: slowest };
}

// ---- the runner ----

export interface TargetReport {
  target: string;
  cases: number;
  failed: boolean;
  seconds: number;
  rssBefore: number | undefined;
  rssAfter: number | undefined;
  peakRss: number | undefined;
  slowestProbeMs: number;
}

/**
 * Runs `check` on values of `arbitrary` — the slice's number of cases, or the full run's within its time — each
 * with probes (withProbes), in the case's time bound, with the console's RSS under its bound afterwards. A
 * failure is shrunk by fast-check and thrown with the seed and path that replay it (HANGAR_FUZZ_SEED).
 */
export async function fuzzConsole<T>(options: { target: string; budget: FuzzBudget; request: APIRequestContext; consolePid: number | undefined }, arbitrary: fc.Arbitrary<T>, check: (value: T) => Promise<void>): Promise<TargetReport> {
  const { target, budget, request, consolePid } = options;
  const rssBefore = rssOf(consolePid);
  let peakRss = rssBefore;
  let slowestProbeMs = 0;
  const started = performance.now();
  const property = fc.asyncProperty(arbitrary, async (value) => {
    const caseStarted = performance.now();
    const { slowestProbeMs: slowest } = await withProbes(request, () => check(value));
    slowestProbeMs = Math.max(slowestProbeMs, slowest);
    const took = performance.now() - caseStarted;
    if (took > budget.caseMs) throw new Error(`the case took ${took.toFixed(0)} ms, more than ${budget.caseMs}`);
    const rss = rssOf(consolePid);
    if (rss !== undefined) {
      peakRss = Math.max(peakRss ?? 0, rss);
      if (rss > MAX_RSS) throw new Error(`the console's RSS is ${mib(rss)} after the case, more than ${mib(MAX_RSS)}`);
    }
  });
  const details = await fc.check(property, {
    seed: FUZZ_SEED,
    numRuns: FUZZ_FULL ? budget.full : budget.slice,
    includeErrorInReport: true,
    // The report lists every failure met while shrinking, the first (the case as generated) included.
    verbose: fc.VerbosityLevel.Verbose,
    // A case stuck past twice its bound is a hang: fast-check fails it (and shrinks on).
    timeout: budget.caseMs * 2,
    // The full run stops at its time, as a success; a slice's shrinking stops at the same bound.
    interruptAfterTimeLimit: budget.fullSeconds * 1000,
    markInterruptAsFailure: false,
  });
  const report: TargetReport = {
    target,
    cases: details.numRuns,
    failed: details.failed,
    seconds: (performance.now() - started) / 1000,
    rssBefore,
    rssAfter: rssOf(consolePid),
    peakRss,
    slowestProbeMs,
  };
  const line = `fuzz ${target}: seed ${details.seed}, ${report.cases} cases${details.interrupted ? " (time limit)" : ""}, ${details.failed ? `1 failure (${details.numShrinks} shrinks)` : "0 failures"}, ${report.seconds.toFixed(1)} s, console RSS ${mib(rssBefore)} → ${mib(report.rssAfter)} (peak ${mib(peakRss)}), slowest probe ${slowestProbeMs.toFixed(0)} ms`;
  console.log(line);
  test.info().annotations.push({ type: "fuzz", description: line });
  if (details.failed) throw new Error(`fuzz ${target}: ${fc.defaultReportMessage(details)}`);
  return report;
}

/** Polls `condition` until it holds (answers undefined) or `ms` have passed: then its last complaint is thrown. */
export async function eventually(ms: number, condition: () => Promise<string | undefined>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const complaint = await condition();
    if (complaint === undefined) return;
    if (Date.now() > deadline) throw new Error(complaint);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
