import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { TRPCError } from "@trpc/server";
import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { appRouter, createCaller } from "../root.ts";

const fixtureRoot = resolve(import.meta.dirname, "../../storage/fixtures/python-root");
const xapiRoot = resolve(import.meta.dirname, "../../storage/fixtures/xapi-root");
// Listing plugins never asks the toolstack, so a session the console sealed is all these callers need (every
// procedure asks the toolstack whether the session holds first, and goes on when it cannot be reached: here it cannot).
process.env.HANGAR_TOOLSTACK_URL = "http://127.0.0.1:9";
const session = { session: "OpaqueRef:plugins-test", user: "root", since: 0, role: "pool-admin" as const, superuser: true };
const callerFor = (pluginRoot: string) => createCaller({ headers: new Headers(), pluginRoot, session });

test("plugins refuses a caller without a session: UNAUTHORIZED, 401 over HTTP", async () => {
  await assert.rejects(createCaller({ headers: new Headers(), pluginRoot: fixtureRoot, session: undefined }).plugins.list(), (error: unknown) => {
    assert.ok(error instanceof TRPCError);
    assert.equal(error.code, "UNAUTHORIZED");
    return true;
  });
  const response = await fetchRequestHandler({
    endpoint: "/api/trpc",
    req: new Request("http://hangar.test/api/trpc/plugins.list"),
    router: appRouter,
    createContext: () => ({ headers: new Headers(), pluginRoot: fixtureRoot, session: undefined }),
  });
  assert.equal(response.status, 401);
});

describe("plugins.list", () => {
  test("describes the registered plugins and says why the others were skipped", async () => {
    const scan = await callerFor(fixtureRoot).plugins.list();
    assert.equal(scan.root, fixtureRoot);
    assert.deepEqual(
      scan.plugins.map((p) => [p.kind, p.dir, p.type]),
      [
        ["volume", "org.example.storage.scratch", "scratch"],
        ["datapath", "loop", "loop"],
      ],
    );
    const scratch = scan.plugins[0];
    assert.ok(scratch);
    assert.equal(scratch.name, "Scratch SR");
    assert.equal(scratch.vendor, "Example Storage Co");
    assert.equal(scratch.version, "1.2.3");
    assert.equal(scratch.required_api_version, "5.0");
    assert.deepEqual(scratch.declaredFeatures, ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "SR_PROBE", "SR_STATS", "VDI_CREATE", "VDI_DELETE", "VDI_SNAPSHOT"]);
    assert.deepEqual(scratch.derivedFeatures.slice(0, 3), [
      { feature: "SR_SCAN", script: "SR.ls" },
      { feature: "SR_UPDATE", script: "SR.stat" },
      { feature: "VDI_UPDATE", script: "Volume.stat" },
    ]);
    assert.deepEqual(scratch.features, [...scratch.declaredFeatures, ...scratch.derivedFeatures.map((d) => d.feature)]);
    assert.deepEqual(scratch.configuration, { path: "Directory that holds the SR" });
    assert.deepEqual(scratch.warnings, []);
    assert.equal("client" in scratch, false, "no plugin client leaks into the response");

    assert.deepEqual(
      scan.skipped.map((s) => [s.kind, s.dir]),
      [
        ["volume", "org.example.storage.ancient"],
        ["datapath", "broken"],
      ],
    );
    assert.match(scan.skipped[0]?.reason ?? "", /2\.0/);
    assert.match(scan.skipped[1]?.reason ?? "", /cannot load kernel module nbd/);
  });

  test("features as the toolstack takes them: declared (VDI_DESTROY read as VDI_DELETE), derived, effective", async () => {
    const scan = await callerFor(xapiRoot).plugins.list();
    const simpleFile = scan.plugins.find((p) => p.type === "simple-file");
    assert.ok(simpleFile);
    assert.deepEqual(simpleFile.declaredFeatures, ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "VDI_CREATE", "VDI_DELETE"]);
    assert.deepEqual(
      simpleFile.derivedFeatures.filter((d) => d.script === undefined).map((d) => d.feature),
      ["VDI_ATTACH", "VDI_DETACH", "VDI_ACTIVATE", "VDI_DEACTIVATE", "VDI_INTRODUCE", "VDI_RESET_ON_BOOT/2"],
    );
    assert.ok(simpleFile.derivedFeatures.some((d) => d.feature === "VDI_CLONE" && d.script === "Volume.clone"));
    assert.equal(simpleFile.features.length, simpleFile.declaredFeatures.length + simpleFile.derivedFeatures.length);
    const loop = scan.plugins.find((p) => p.kind === "datapath");
    assert.deepEqual([loop?.declaredFeatures, loop?.derivedFeatures, loop?.features], [["NONPERSISTENT"], [], ["NONPERSISTENT"]]);
  });

  test("an empty plugin root lists nothing", async (t) => {
    const root = await mkdtemp(join(tmpdir(), "hangar-api-empty-"));
    t.after(() => rm(root, { recursive: true, force: true }));
    const scan = await callerFor(root).plugins.list();
    assert.deepEqual({ plugins: scan.plugins, skipped: scan.skipped }, { plugins: [], skipped: [] });
  });
});

describe("plugins.diagnostics", () => {
  let failingRoot = "";
  before(async () => {
    // A volume plugin that registers but whose Plugin.diagnostics fails the way real plugins fail.
    failingRoot = await mkdtemp(join(tmpdir(), "hangar-api-failing-"));
    const dir = join(failingRoot, "volume", "org.example.storage.grumpy");
    await mkdir(dir, { recursive: true });
    const query = JSON.stringify({
      plugin: "grumpy", name: "Grumpy SR", description: "", vendor: "", copyright: "", version: "0.1",
      required_api_version: "5.0", features: [], configuration: {}, required_cluster_stack: [],
    });
    await writeFile(join(dir, "Plugin.Query"), `#!/bin/sh\ncat >/dev/null\necho '${query}'\n`);
    await writeFile(
      join(dir, "Plugin.diagnostics"),
      `#!/bin/sh\ncat >/dev/null\necho '{"code":"SR_BACKEND_FAILURE","params":["Unimplemented","Plugin.diagnostics"],"backtrace":{"error":"","files":[],"lines":[]}}'\nexit 1\n`,
    );
    await chmod(join(dir, "Plugin.Query"), 0o755);
    await chmod(join(dir, "Plugin.diagnostics"), 0o755);
  });
  after(() => rm(failingRoot, { recursive: true, force: true }));

  test("returns what the plugin prints, found by SR type, scheme or directory", async () => {
    const api = callerFor(fixtureRoot);
    const scratch = await api.plugins.diagnostics({ name: "scratch" });
    assert.equal(scratch.name, "scratch");
    assert.match(scratch.diagnostics, /^scratch plugin: python \d+\.\d+/);
    const loop = await api.plugins.diagnostics({ name: "loop", kind: "datapath" });
    assert.equal(loop.name, "loop");
    const byDir = await api.plugins.diagnostics({ name: "org.example.storage.scratch", kind: "volume" });
    assert.equal(byDir.diagnostics, scratch.diagnostics);
  });

  test("an unknown or skipped plugin is NOT_FOUND", async () => {
    const api = callerFor(fixtureRoot);
    for (const input of [{ name: "nope" }, { name: "broken" }, { name: "loop", kind: "volume" as const }]) {
      await assert.rejects(api.plugins.diagnostics(input), (error: unknown) => {
        assert.ok(error instanceof TRPCError);
        assert.equal(error.code, "NOT_FOUND");
        assert.match(error.message, new RegExp(`'${input.name}'`));
        return true;
      });
    }
  });

  test("a plugin error becomes a TRPCError that says what failed", async () => {
    await assert.rejects(callerFor(failingRoot).plugins.diagnostics({ name: "grumpy" }), (error: unknown) => {
      assert.ok(error instanceof TRPCError);
      assert.equal(error.code, "NOT_IMPLEMENTED");
      assert.match(error.message, /^Plugin\.diagnostics on 'grumpy' failed: .*Unimplemented/);
      return true;
    });
  });

  test("over HTTP, invalid input answers 400 with the zod errors flattened per field", async () => {
    const input = encodeURIComponent(JSON.stringify({ name: "  " }));
    const response = await fetchRequestHandler({
      endpoint: "/api/trpc",
      req: new Request(`http://hangar.test/api/trpc/plugins.diagnostics?input=${input}`),
      router: appRouter,
      createContext: () => ({ headers: new Headers(), pluginRoot: fixtureRoot, session }),
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { error: { data: { code: string; zodError: unknown } } };
    assert.equal(body.error.data.code, "BAD_REQUEST");
    assert.deepEqual(body.error.data.zodError, { formErrors: [], fieldErrors: { name: ["Name a plugin"] } });
  });
});
