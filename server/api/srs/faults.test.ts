// An SR whose plugin hangs, beside the bundled file SR: the list and the SR page still answer within their
// deadlines, the hung SR Unreachable with the reason, the others unaffected.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { defaultPluginRoot } from "../../storage/registry.ts";
import { startConsoleUnderTest } from "../testing.ts";

/** The hung calls sleep this long: past every console deadline, short enough not to hold the test run. */
const HANG_S = 12;

function pluginRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "hangar-srs-faults-"));
  for (const kind of ["volume", "datapath"]) mkdirSync(join(root, kind));
  symlinkSync(join(defaultPluginRoot(), "volume", "org.xen.xapi.storage.file"), join(root, "volume", "org.xen.xapi.storage.file"));
  for (const scheme of ["nbd", "file"]) symlinkSync(join(defaultPluginRoot(), "datapath", scheme), join(root, "datapath", scheme));
  const query = {
    plugin: "hung", name: "Hung test plugin", description: "hangs on purpose", vendor: "Hangar tests", copyright: "", version: "1",
    required_api_version: "5.0", features: ["SR_ATTACH", "SR_CREATE", "SR_DETACH", "SR_SCAN", "SR_STATS"], configuration: {}, required_cluster_stack: [],
  };
  const dir = join(root, "volume", "org.hangar.test.hung");
  mkdirSync(dir);
  const scripts: Record<string, string> = {
    "Plugin.Query": `echo '${JSON.stringify(query)}'`,
    "SR.create": "echo '{}'",
    "SR.attach": `echo '"hung:///sr"'`,
    "SR.detach": "echo null",
    "SR.stat": `exec sleep ${HANG_S}`,
    "SR.ls": `exec sleep ${HANG_S}`,
  };
  for (const [name, body] of Object.entries(scripts)) {
    writeFileSync(join(dir, name), `#!/bin/sh\ncat >/dev/null\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  }
  return root;
}

test("an SR whose plugin hangs is Unreachable with the reason; the list and its page still answer", async (t) => {
  const root = pluginRoot();
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const { caller } = await startConsoleUnderTest(t, { pluginRoot: root });
  const hung = await caller.srs.create({ type: "hung", name: "Hung SR", deviceConfig: {} });

  let started = Date.now();
  const { srs } = await caller.srs.list();
  assert.ok(Date.now() - started < 8000, `list took ${Date.now() - started} ms`);
  const listed = srs.find((sr) => sr.ref === hung.ref);
  assert.deepEqual(listed?.health, { tag: "Unreachable", reason: "SR.stat did not answer within 5 s" });
  assert.equal(srs.find((sr) => sr.type === "file")?.health.tag, "Healthy");

  started = Date.now();
  const page = await caller.srs.get({ sr: hung.uuid });
  assert.ok(Date.now() - started < 8000, `get took ${Date.now() - started} ms`);
  assert.equal(page.health.tag, "Unreachable");
  assert.match(page.health.reason, /did not answer within 5 s/);
  assert.equal(page.attached, true);
});
