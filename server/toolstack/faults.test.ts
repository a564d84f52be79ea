// Plugins that misbehave, beside the bundled ones in one plugin root: one that hangs, one that prints
// garbage, one whose SR.stat is slow. Their calls fail with XenAPI errors carrying what went wrong, records
// of their SRs say so in `health`, listings leave them out, and the toolstack keeps serving the others.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { defaultPluginRoot } from "../storage/registry.ts";
import { assertXenError, MiB, startTestToolstack, type TestToolstack, type XenApiClient } from "./storage-testing.ts";

const TIMEOUT_MS = 1500;

function query(type: string): string {
  return JSON.stringify({
    plugin: type,
    name: `${type} test plugin`,
    description: "misbehaves on purpose",
    vendor: "Hangar tests",
    copyright: "",
    version: "1",
    required_api_version: "5.0",
    features: ["SR_ATTACH", "SR_CREATE", "SR_DETACH", "SR_SCAN", "VDI_CREATE"],
    configuration: {},
    required_cluster_stack: [],
  });
}

const stat = (type: string) =>
  JSON.stringify({ sr: `${type}:///sr`, name: type, description: "", free_space: 1, total_space: 2, datasources: [], clustered: false, health: ["Healthy", ""] });

/** Shell script plugins: method name → script body. */
const PLUGINS: Record<string, Record<string, string>> = {
  hung: { "SR.stat": "exec sleep 30", "SR.ls": "exec sleep 30", "Volume.create": "exec sleep 30" },
  garbage: { "SR.stat": "echo 'this is not JSON'", "SR.ls": `echo '[{"key": 42}]'`, "Volume.create": "echo oops; exit 1" },
  slow: { "SR.stat": `sleep 1; echo '${stat("slow")}'`, "SR.ls": "echo '[]'" },
};

/** A plugin root: the bundled plugins (linked) and the misbehaving ones. */
function pluginRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "hangar-faults-"));
  for (const kind of ["volume", "datapath"]) mkdirSync(join(root, kind));
  symlinkSync(join(defaultPluginRoot(), "volume", "org.xen.xapi.storage.file"), join(root, "volume", "org.xen.xapi.storage.file"));
  for (const scheme of ["nbd", "file"]) symlinkSync(join(defaultPluginRoot(), "datapath", scheme), join(root, "datapath", scheme));
  for (const [type, methods] of Object.entries(PLUGINS)) {
    const dir = join(root, "volume", `org.hangar.test.${type}`);
    mkdirSync(dir);
    const scripts: Record<string, string> = {
      "Plugin.Query": `echo '${query(type)}'`,
      "SR.create": "echo '{}'",
      "SR.attach": `echo '"${type}:///sr"'`,
      "SR.detach": "echo null",
      ...methods,
    };
    for (const [name, body] of Object.entries(scripts)) {
      writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(dir, name), 0o755);
    }
  }
  return root;
}

describe("misbehaving plugins", () => {
  let root: string;
  let host: TestToolstack;
  let client: XenApiClient;
  let hostRef: string;
  let defaultSr: string;

  const createSr = (type: string) => client.call<string>("SR.create", hostRef, {}, 0, type, "", type, "user", false, {});

  /** Still serving: a session call, and the file SR's volumes. */
  async function assertServing(): Promise<void> {
    assert.equal(await client.call("session.get_this_host", client.session), hostRef);
    const vdi = await client.call<string>("VDI.create", { SR: defaultSr, virtual_size: MiB });
    assert.ok((await client.call<string[]>("VDI.get_all")).includes(vdi));
  }

  async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
    const started = Date.now();
    return { value: await work, ms: Date.now() - started };
  }

  before(async () => {
    root = pluginRoot();
    host = await startTestToolstack({ pluginRoot: root, pluginTimeoutMs: TIMEOUT_MS });
    client = host.client;
    hostRef = (await client.call<string[]>("host.get_all"))[0]!;
    defaultSr = await client.call<string>("pool.get_default_SR", (await client.call<string[]>("pool.get_all"))[0]);
  });
  after(async () => {
    await host.stop();
    rmSync(root, { recursive: true, force: true });
  });

  test("SR.stat of several SRs runs in parallel: five SRs whose SR.stat takes 1 s list in about 1 s", async () => {
    const srs = await Promise.all([1, 2, 3, 4, 5].map(() => createSr("slow")));
    const { value: records, ms } = await timed(client.call<Record<string, Record<string, unknown>>>("SR.get_all_records"));
    for (const sr of srs) assert.deepEqual(records[sr]!.health, ["Healthy", ""]);
    assert.ok(ms < 3000, `${ms} ms: the stats ran one after another`);
    for (const sr of srs) {
      await client.call("PBD.unplug", (await client.call<string[]>("SR.get_PBDs", sr))[0]);
      await client.call("SR.forget", sr);
    }
  });

  test("a plugin that hangs: its calls fail after the time limit, its SR shows Unreachable, the rest keeps serving", async () => {
    const sr = await createSr("hung");
    const scan = await timed(assertXenError(client.call("SR.scan", sr), "SR_BACKEND_FAILURE"));
    assert.equal(scan.value.params[0], "SCRIPT_FAILED");
    assert.match(scan.value.params.join(" "), /timed out after 1\.5 s/);
    assert.ok(scan.ms < 5000, `${scan.ms} ms`);
    const create = await assertXenError(client.call("VDI.create", { SR: sr, virtual_size: MiB }), "SR_BACKEND_FAILURE");
    assert.match(create.params.join(" "), /Volume\.create timed out after 1\.5 s/);

    const record = await timed(client.call<Record<string, unknown>>("SR.get_record", sr));
    assert.equal((record.value.health as string[])[0], "Unreachable");
    assert.match((record.value.health as string[])[1]!, /timed out/);
    const listing = await timed(client.call<Record<string, unknown>>("VDI.get_all_records"));
    assert.ok(listing.ms < 5000, `the hung SR holds the VDI listing only until the time limit (${listing.ms} ms)`);
    assert.ok(Object.values(listing.value).every((vdi) => (vdi as { SR: string }).SR === defaultSr), "the hung SR's VDIs are left out");
    await assertServing();
  });

  test("a plugin that prints garbage: SCRIPT_FAILED or PLUGIN_RESULT_INVALID with what it printed", async () => {
    const sr = await createSr("garbage");
    const scan = await assertXenError(client.call("SR.scan", sr), "SR_BACKEND_FAILURE");
    assert.equal(scan.params[0], "SCRIPT_FAILED");
    assert.match(scan.params.join(" "), /bad JSON on stdout.*this is not JSON/);
    const create = await assertXenError(client.call("VDI.create", { SR: sr, virtual_size: MiB }), "SR_BACKEND_FAILURE");
    assert.deepEqual(create.params.slice(0, 3), ["SCRIPT_FAILED", "org.hangar.test.garbage", "Volume.create"]);
    assert.match(create.params.join(" "), /bad JSON on stdout.*oops/);
    assert.equal((await client.call<string[]>("SR.get_health", sr))[0], "Unreachable");
    // SR.ls answers JSON of the wrong shape: the listing leaves the SR out rather than fail.
    assert.ok(Object.values(await client.call<Record<string, { SR: string }>>("VDI.get_all_records")).every((vdi) => vdi.SR !== sr));
    await assertServing();
  });
});
