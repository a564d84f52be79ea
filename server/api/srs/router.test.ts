// The srs router against a real toolstack (fresh data dir, bundled plugins, a default `file` SR): one
// toolstack for the whole file (starting one costs seconds), subtests in order as a user would go.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { TRPCError } from "@trpc/server";
import { defaultPluginRoot } from "../../storage/registry.ts";
import { pluginRegistry } from "../storage-access.ts";
import { startConsoleUnderTest } from "../testing.ts";

function assertTrpcError(code: TRPCError["code"], message?: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof TRPCError, String(error));
    assert.equal(error.code, code, error.message);
    if (message !== undefined) assert.match(error.message, message);
    return true;
  };
}

test("srs router", async (t) => {
  const { caller, anonymous } = await startConsoleUnderTest(t);
  const scratch = mkdtempSync(join(tmpdir(), "hangar-srs-test-"));
  t.after(() => rmSync(scratch, { recursive: true, force: true }));

  await t.test("refuses an anonymous caller", async () => {
    await assert.rejects(anonymous.srs.list(), assertTrpcError("UNAUTHORIZED"));
    await assert.rejects(anonymous.srs.create({ type: "file", name: "x", deviceConfig: { path: join(scratch, "x") } }), assertTrpcError("UNAUTHORIZED"));
  });

  await t.test("list: the default file SR, Healthy, attached, with its space", async () => {
    const { srs } = await caller.srs.list();
    assert.equal(srs.length, 1);
    const [sr] = srs;
    assert.ok(sr);
    assert.equal(sr.type, "file");
    assert.equal(sr.name, "Local storage");
    assert.deepEqual(sr.health, { tag: "Healthy", reason: "" });
    assert.equal(sr.attached, true);
    assert.equal(sr.isDefault, true);
    assert.ok(sr.physicalSize > 0 && sr.physicalUtilisation <= sr.physicalSize);
    assert.equal(sr.volumeCount, 0);
    assert.ok(sr.allowedOperations.includes("destroy"));
  });

  await t.test("list without volume counts (the import card's picker): the same SRs, the toolstack's counts", async () => {
    const counted = await caller.srs.list();
    const light = await caller.srs.list({ volumeCounts: false });
    assert.deepEqual(light, counted);
  });

  await t.test("types: the file plugin with its configuration keys and features", async () => {
    const { types } = await caller.srs.types();
    const file = types.find((type) => type.type === "file");
    assert.ok(file);
    assert.equal(file.name, "File SR");
    assert.deepEqual(file.configuration.map((c) => c.key), ["path", "uri"]);
    assert.match(file.configuration[0]?.description ?? "", /Directory that holds the SR/);
    assert.deepEqual([file.canCreate, file.canProbe, file.canDestroy], [true, true, true]);
  });

  const path = join(scratch, "made-by-test");
  await t.test("probe: a free directory can take an SR; the default SR's is found and known", async () => {
    const free = await caller.srs.probe({ type: "file", deviceConfig: { path, uri: "  " } });
    assert.deepEqual(free.results, [{ configuration: { path }, complete: true, extraInfo: { creatable: "true" }, sr: null }]);

    const { srs } = await caller.srs.list();
    const existing = await caller.srs.get({ sr: srs[0]!.ref });
    const found = await caller.srs.probe({ type: "file", deviceConfig: { path: existing.deviceConfig.path ?? "" } });
    const sr = found.results.find((r) => r.sr !== null)?.sr;
    assert.equal(sr?.uuid, existing.uuid);
    assert.deepEqual(sr?.knownAs, { ref: existing.ref, name: "Local storage" });
  });

  let made = { ref: "", uuid: "", task: "" };
  await t.test("create: a file SR in a temp dir, as a task; listed Healthy and attached", async () => {
    made = await caller.srs.create({ type: "file", name: "Test SR", description: "made by router.test", deviceConfig: { path, uri: "" } });
    assert.match(made.ref, /^OpaqueRef:/);
    assert.match(made.task, /^OpaqueRef:/);
    // A volume the toolstack has not listed yet (made through the plugin) is counted: counts come from SR.ls.
    const plugin = (await pluginRegistry(defaultPluginRoot())).find("file", "volume")!;
    await plugin.client.call("Volume.create", { dbg: "test", sr: `file://${path}`, name: "v", description: "", size: 1024 * 1024, sharable: false });
    const sr = (await caller.srs.list()).srs.find((s) => s.ref === made.ref);
    assert.ok(sr);
    assert.deepEqual([sr.name, sr.description, sr.type, sr.attached, sr.isDefault, sr.health.tag], ["Test SR", "made by router.test", "file", true, false, "Healthy"]);
    assert.equal(sr.volumeCount, 1);
  });

  await t.test("get by uuid or ref: live SR.stat from the plugin", async () => {
    const byUuid = await caller.srs.get({ sr: made.uuid });
    assert.equal(byUuid.ref, made.ref);
    assert.equal(byUuid.source, "plugin");
    assert.equal(byUuid.health.tag, "Healthy");
    assert.equal(byUuid.uri, `file://${path}`);
    assert.equal(byUuid.deviceConfig.path, path);
    assert.ok(byUuid.physicalSize > 0);
    const byRef = await caller.srs.get({ sr: made.ref });
    assert.equal(byRef.uuid, made.uuid);
    await assert.rejects(caller.srs.get({ sr: "00000000-0000-4000-8000-000000000000" }), assertTrpcError("NOT_FOUND"));
    await assert.rejects(caller.srs.get({ sr: "OpaqueRef:00000000-0000-4000-8000-000000000000" }), assertTrpcError("NOT_FOUND"));
  });

  await t.test("setDefault: the new SR, then back", async () => {
    const original = (await caller.srs.list()).srs.find((s) => s.isDefault)!;
    await caller.srs.setDefault({ sr: made.ref });
    assert.deepEqual((await caller.srs.list()).srs.filter((s) => s.isDefault).map((s) => s.ref), [made.ref]);
    await caller.srs.setDefault({ sr: original.ref });
    assert.deepEqual((await caller.srs.list()).srs.filter((s) => s.isDefault).map((s) => s.ref), [original.ref]);
  });

  await t.test("detach: listed detached and Unreachable with the reason; get still answers; attach brings it back", async () => {
    const { tasks } = await caller.srs.detach({ sr: made.ref });
    assert.equal(tasks.length, 1);
    const sr = (await caller.srs.list()).srs.find((s) => s.ref === made.ref)!;
    assert.equal(sr.attached, false);
    assert.equal(sr.health.tag, "Unreachable");
    assert.match(sr.health.reason, /Detached/);
    const page = await caller.srs.get({ sr: made.ref });
    assert.deepEqual([page.source, page.attached, page.uri, page.health.tag], ["toolstack", false, null, "Unreachable"]);
    await assert.rejects(caller.srs.destroy({ sr: made.ref }), assertTrpcError("BAD_REQUEST", /detached/i));
    // Detaching again is nothing to do.
    assert.deepEqual(await caller.srs.detach({ sr: made.ref }), { tasks: [] });
    await caller.srs.attach({ sr: made.ref });
    const back = (await caller.srs.list()).srs.find((s) => s.ref === made.ref)!;
    assert.deepEqual([back.attached, back.health.tag], [true, "Healthy"]);
  });

  await t.test("a failing SR is listed Unreachable with the plugin's reason, and its page still renders", async () => {
    // The SR's directory gone from under it: SR.stat fails in the plugin (once the toolstack's 2 s stat cache expires;
    // the read after that still answers the last stat while the toolstack asks again, the next ones the failure).
    const failing = join(scratch, "failing");
    const sr = await caller.srs.create({ type: "file", name: "Failing SR", deviceConfig: { path: failing } });
    // Retried: the attached SR's daemons may be writing a file in it just then (ENOTEMPTY, seen in CI).
    rmSync(failing, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
    await sleep(2100);
    let listed = (await caller.srs.list()).srs.find((s) => s.ref === sr.ref)!;
    for (const deadline = Date.now() + 5000; listed.health.tag !== "Unreachable" && Date.now() < deadline; await sleep(100)) {
      listed = (await caller.srs.list()).srs.find((s) => s.ref === sr.ref)!;
    }
    assert.equal(listed.health.tag, "Unreachable");
    assert.notEqual(listed.health.reason, "");
    const page = await caller.srs.get({ sr: sr.ref });
    assert.equal(page.health.tag, "Unreachable");
    assert.match(listed.health.reason, /^The storage plugin failed: the SR does not exist: /);
    assert.equal(page.health.reason, listed.health.reason);
    // The other SRs are unaffected.
    assert.equal((await caller.srs.list()).srs.find((s) => s.ref === made.ref)?.health.tag, "Healthy");
  });

  await t.test("create with a configuration the plugin refuses: its reason in words", async () => {
    const taken = join(scratch, "taken");
    rmSync(taken, { recursive: true, force: true });
    mkdirSync(taken);
    writeFileSync(join(taken, "someone-elses-file"), "data");
    await assert.rejects(caller.srs.create({ type: "file", name: "Refused", deviceConfig: { path: taken } }), assertTrpcError("BAD_GATEWAY", /storage plugin failed/));
    await assert.rejects(caller.srs.create({ type: "file", name: "No path", deviceConfig: {} }), assertTrpcError("BAD_GATEWAY", /path/));
    await assert.rejects(caller.srs.create({ type: "file", name: " ", deviceConfig: { path: taken } }), assertTrpcError("BAD_REQUEST"));
    assert.equal((await caller.srs.list()).srs.some((s) => s.name === "Refused" || s.name === "No path"), false);
  });

  await t.test("forget: refused while attached, done with detachFirst", async () => {
    const other = await caller.srs.create({ type: "file", name: "To forget", deviceConfig: { path: join(scratch, "forget") } });
    await assert.rejects(caller.srs.forget({ sr: other.ref }), assertTrpcError("CONFLICT", /Detach it first/));
    const { tasks } = await caller.srs.forget({ sr: other.ref, detachFirst: true });
    assert.equal(tasks.length, 2);
    assert.equal((await caller.srs.list()).srs.some((s) => s.ref === other.ref), false);
  });

  await t.test("destroy: the SR and its records go", async () => {
    await caller.srs.destroy({ sr: made.ref });
    assert.equal((await caller.srs.list()).srs.some((s) => s.ref === made.ref), false);
    await assert.rejects(caller.srs.get({ sr: made.uuid }), assertTrpcError("NOT_FOUND"));
  });
});
