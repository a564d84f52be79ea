// Hangar's own plugins under the conformance suite, each run through bin/hangar as an administrator would.
// Every call of our plugins is a process, and a run makes a few hundred: this file is the slow one.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";
import { formatResult, formatSummary } from "./report.ts";
import { assertConsistent, runPrinted } from "./testing.ts";

const bundledRoot = resolve(import.meta.dirname, "../plugins");
const ready = (plugin: string) => existsSync(join(bundledRoot, plugin, "Plugin.Query"));

describe("hangar conformance on the bundled plugin root", { concurrency: true, timeout: 600_000 }, () => {
  for (const datapath of ["nbd", "file"]) {
    const missing = ["volume/org.xen.xapi.storage.file", `datapath/${datapath}`].filter((plugin) => !ready(plugin));
    test(`file --datapath ${datapath}: every check passes or is skipped`, { skip: missing.length > 0 && `not in server/plugins yet: ${missing.join(", ")}` }, async (t) => {
      const run = await runPrinted(t, ["--root", bundledRoot, "file", "--datapath", datapath]);
      t.diagnostic(`file --datapath ${datapath}: ${formatSummary(run.counts)}`);
      for (const r of run.results.filter((r) => r.status !== "passed")) t.diagnostic(formatResult(r));
      assertConsistent(run);
      assert.deepEqual(run.results.filter((r) => r.status === "failed").map((r) => `${r.name} — ${r.reason}`), []);
    });
  }
});
