// Conformance from the console against the bundled file plugin: a run is a job whose results arrive check
// by check, one run at a time, its scratch SR under the data dir removed afterwards.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { defaultPluginRoot } from "../../storage/registry.ts";
import { createCaller } from "../root.ts";
import { settled } from "./runs.ts";

// Conformance never asks the toolstack: a session the console sealed is all the caller needs (every procedure
// asks the toolstack whether the session holds first, and goes on when it cannot be reached: here it cannot).
process.env.HANGAR_TOOLSTACK_URL = "http://127.0.0.1:9";
const session = { session: "OpaqueRef:conformance-test", user: "root", since: 0, role: "pool-admin" as const, superuser: true };
const caller = createCaller({ headers: new Headers(), pluginRoot: defaultPluginRoot(), session });
const anonymous = createCaller({ headers: new Headers(), pluginRoot: defaultPluginRoot(), session: undefined });

const codeOf = (code: string) => (error: unknown) => error instanceof TRPCError && error.code === code;

test("conformance.run on the file plugin: results check by check, passed checks, scratch SR removed", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "hangar-console-conformance-"));
  const saved = process.env.HANGAR_DATA_DIR;
  process.env.HANGAR_DATA_DIR = dataDir;
  t.after(async () => {
    if (saved === undefined) delete process.env.HANGAR_DATA_DIR;
    else process.env.HANGAR_DATA_DIR = saved;
    await rm(dataDir, { recursive: true, force: true });
  });

  const started = await caller.conformance.run({ plugin: "file", datapath: null });
  assert.equal(started.state, "running");
  assert.equal(started.plugin, "file");
  assert.ok(started.total > 10, `many checks: ${started.total}`);
  await assert.rejects(caller.conformance.run({ plugin: "file", datapath: null }), codeOf("CONFLICT"));

  // Results arrive while the run goes on, and the scratch SR lives under the data dir meanwhile.
  let seen = started;
  for (let i = 0; i < 600 && seen.state === "running" && seen.results.length === 0; i++) {
    await sleep(100);
    seen = await caller.conformance.get({ id: started.id });
  }
  const begun = Date.now();
  const run = await settled(started.id);
  const seconds = (Date.now() - begun) / 1000;
  t.diagnostic(`conformance of the file plugin without a datapath: ${run.results.length} checks, ${seconds.toFixed(1)} s after the first result`);
  assert.equal(run.state, "finished", run.error ?? "");
  assert.equal(run.error, null);
  assert.ok(run.counts.passed > 10, JSON.stringify(run.counts));
  assert.equal(run.counts.failed, 0, JSON.stringify(run.results.filter((r) => r.status === "failed")));
  assert.equal(run.counts.passed + run.counts.failed + run.counts.skipped + run.counts.notes, run.results.length);
  for (const result of run.results) {
    assert.ok(result.name.length > 0);
    assert.ok(result.durationMs >= 0);
    if (result.status === "skipped") assert.ok(result.reason !== null && result.reason.length > 0, `a skip says why: ${result.name}`);
  }
  assert.ok(run.results.some((r) => r.status === "skipped" && /datapath/.test(r.reason ?? "")), "data checks skipped without a datapath");
  assert.ok(run.finishedAt !== null);
  // The plugin keeps its own state in the data dir too (host uuid, run dir); the run's scratch SR is gone.
  assert.deepEqual((await readdir(dataDir)).filter((name) => name.startsWith("conformance-")), [], "the scratch directory is gone");
  assert.deepEqual(
    (await caller.conformance.runs({ plugin: "file" })).runs.map((r) => r.id),
    [run.id],
  );
});

test("conformance: an unknown plugin is refused in words; a caller without a session gets nothing", async () => {
  await assert.rejects(caller.conformance.run({ plugin: "no-such-plugin", datapath: null }), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "NOT_FOUND");
    assert.match(error.message, /No volume plugin for "no-such-plugin"/);
    return true;
  });
  await assert.rejects(caller.conformance.get({ id: "7b1d2f7e-2f59-4b43-9a51-1f0f7f3e0c11" }), codeOf("NOT_FOUND"));
  await assert.rejects(anonymous.conformance.run({ plugin: "file", datapath: null }), codeOf("UNAUTHORIZED"));
  await assert.rejects(anonymous.conformance.runs({}), codeOf("UNAUTHORIZED"));
});
