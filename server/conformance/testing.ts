// Test support: runs `bin/hangar` as a real process, in a TMPDIR of its own, and reads what it printed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestContext } from "node:test";
import type { CheckResult } from "./check.ts";
import type { Counts } from "./report.ts";

const hangar = resolve(import.meta.dirname, "../../bin/hangar");

export interface HangarRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** What the run left in its TMPDIR. */
  leftovers: string[];
}

export interface PrintedRun extends HangarRun {
  header: string;
  results: Pick<CheckResult, "name" | "status" | "reason">[];
  counts: Counts;
}

const LINE = /^(?:✓ (?<passed>.+)|✗ (?<failed>.+?) — (?<why>.+)|- (?<skipped>.+) \(skipped: (?<skip>.+)\)|! (?<note>.+?) — (?<noted>.+))$/;
const SUMMARY = /^(\d+) passed, (\d+) failed, (\d+) skipped, (\d+) notes?$/;

export async function runHangar(t: TestContext, args: string[]): Promise<HangarRun> {
  const tmp = await mkdtemp(join(tmpdir(), "hangar-conformance-test-"));
  t.after(() => rm(tmp, { recursive: true, force: true }));
  const child = spawn(hangar, args, { env: { ...process.env, TMPDIR: tmp }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  const code = await new Promise<number | null>((done) => child.on("close", done));
  return { code, stdout, stderr, leftovers: await readdir(tmp) };
}

/** Runs `hangar conformance ...` and parses what it printed, failing on any malformed line. */
export async function runPrinted(t: TestContext, args: string[]): Promise<PrintedRun> {
  const run = await runHangar(t, ["conformance", ...args]);
  const [header = "", ...rest] = run.stdout.trimEnd().split("\n");
  const summary = SUMMARY.exec(rest.pop() ?? "");
  assert.ok(summary, `the last line is the counts; stdout:\n${run.stdout}\nstderr:\n${run.stderr}`);
  const results = rest.map((line) => {
    const groups = LINE.exec(line)?.groups;
    assert.ok(groups, `malformed line: ${line}`);
    if (groups.passed !== undefined) return { name: groups.passed, status: "passed" as const };
    if (groups.failed !== undefined) return { name: groups.failed, status: "failed" as const, reason: groups.why };
    if (groups.note !== undefined) return { name: groups.note, status: "note" as const, reason: groups.noted };
    return { name: groups.skipped!, status: "skipped" as const, reason: groups.skip };
  });
  const counts = { passed: Number(summary[1]), failed: Number(summary[2]), skipped: Number(summary[3]), notes: Number(summary[4]) };
  return { ...run, header, results, counts };
}

/** The printed counts agree with the lines, the exit status with the failures, and nothing is left behind. */
export function assertConsistent(run: PrintedRun): void {
  const count = (status: string) => run.results.filter((r) => r.status === status).length;
  assert.deepEqual(run.counts, { passed: count("passed"), failed: count("failed"), skipped: count("skipped"), notes: count("note") });
  assert.equal(run.code, run.counts.failed > 0 ? 1 : 0, `exit status; stderr: ${run.stderr}`);
  assert.deepEqual(run.leftovers, [], "the run removes its temporary directory");
}
