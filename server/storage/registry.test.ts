// Plugin roots as a host lays them out: the Python fixture root, and roots each test builds in a temp dir.
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { type TestContext, describe, test } from "node:test";
import { type PluginImplementation, handleJsonRpc } from "./dispatcher.ts";
import { StorageError } from "./errors.ts";
import { type DerivedFeature, type PluginRegistry, chooseDatapath, defaultPluginRoot, featureName, scanPluginRoot, srTypeOf, uriScheme } from "./registry.ts";
import type { QueryResult } from "./types.ts";

const PYTHON_ROOT = join(import.meta.dirname, "fixtures", "python-root");
const XAPI_ROOT = join(import.meta.dirname, "fixtures", "xapi-root");

function query(plugin: string, requiredApiVersion = "5.0"): QueryResult {
  return {
    plugin,
    name: `${plugin} plugin`,
    description: "",
    vendor: "Hangar tests",
    copyright: "",
    version: "1",
    required_api_version: requiredApiVersion,
    features: [],
    configuration: {},
    required_cluster_stack: [],
  };
}

/** A Plugin.Query script answering `result` (after `delay` seconds). */
function queryScript(result: unknown, delay = 0): string {
  return `#!/bin/sh\ncat > /dev/null\n${delay > 0 ? `sleep ${delay}\n` : ""}cat <<'EOF'\n${JSON.stringify(result)}\nEOF\n`;
}

/** Builds a plugin root from {"volume/<dir>/<file>": content}; every file is executable. */
async function makeRoot(t: TestContext, files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), "hangar-root-"));
  t.after(() => rm(root, { recursive: true, force: true }));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), content, { mode: 0o755 });
  }
  return root;
}

async function serveJsonRpc(t: TestContext, impl: PluginImplementation, where: number | string = 0): Promise<string> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => void handleJsonRpc(impl, Buffer.concat(chunks).toString("utf8")).then((json) => res.end(json)));
  });
  await new Promise<void>((done) => (typeof where === "number" ? server.listen(where, "127.0.0.1", done) : server.listen(where, done)));
  t.after(() => new Promise<void>((done) => server.close(() => done())).finally(() => server.closeAllConnections()));
  return typeof where === "string" ? `unix://${where}` : `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

let scanned: Promise<PluginRegistry> | undefined;
/** The fixture root scanned once for the tests that only read it. */
const pythonRegistry = () => (scanned ??= scanPluginRoot(PYTHON_ROOT));

const summary = (registry: PluginRegistry) => registry.plugins.map((p) => `${p.kind} ${p.dir} ${p.type}`);

describe("the Python fixture root", () => {
  test("registers the working plugins and skips the others with their reason", async () => {
    const registry = await pythonRegistry();
    assert.equal(registry.root, PYTHON_ROOT);
    assert.deepEqual(summary(registry), ["volume org.example.storage.scratch scratch", "datapath loop loop"]);
    const [scratch, loop] = registry.plugins;
    assert.equal(scratch?.path, join(PYTHON_ROOT, "volume", "org.example.storage.scratch"));
    assert.equal(scratch?.query.plugin, "scratch");
    assert.equal(scratch?.query.version, "1.2.3");
    assert.deepEqual(scratch?.query.configuration, { path: "Directory that holds the SR" });
    assert.ok(scratch?.query.features.includes("VDI_CREATE"));
    assert.deepEqual(scratch?.warnings, []);
    assert.equal(scratch?.client.name, "org.example.storage.scratch");
    assert.equal(scratch?.client.transport.description, `exec ${scratch?.path}`);
    assert.equal(loop?.path, join(PYTHON_ROOT, "datapath", "loop"));
    assert.deepEqual(loop?.query.features, ["NONPERSISTENT"]);
    assert.deepEqual(registry.skipped, [
      {
        kind: "volume",
        dir: "org.example.storage.ancient",
        path: join(PYTHON_ROOT, "volume", "org.example.storage.ancient"),
        reason: "requires API version 2.0; supported: 5.0, 3.0",
      },
      {
        kind: "datapath",
        dir: "broken",
        path: join(PYTHON_ROOT, "datapath", "broken"),
        reason: "Plugin.Query failed: SR_BACKEND_FAILURE: cannot load kernel module nbd",
      },
    ]);
  });

  test("a relative root is made absolute", async () => {
    const registry = await scanPluginRoot(relative(process.cwd(), PYTHON_ROOT));
    assert.equal(registry.root, PYTHON_ROOT);
    assert.equal(registry.plugins.length, 2);
  });

  test("find by directory, SR type or URI scheme, with kind narrowing", async () => {
    const registry = await pythonRegistry();
    assert.equal(registry.find("org.example.storage.scratch")?.type, "scratch");
    assert.equal(registry.find("ORG.EXAMPLE.STORAGE.SCRATCH")?.type, "scratch");
    assert.equal(registry.find("scratch")?.dir, "org.example.storage.scratch");
    assert.equal(registry.find("Scratch")?.dir, "org.example.storage.scratch");
    assert.equal(registry.find("loop")?.kind, "datapath");
    assert.equal(registry.find("loop", "datapath")?.dir, "loop");
    assert.equal(registry.find("loop", "volume"), undefined);
    assert.equal(registry.find("scratch", "datapath"), undefined);
    assert.equal(registry.find("scratch", "volume")?.kind, "volume");
    assert.equal(registry.find("broken"), undefined, "skipped plugins are not found");
    assert.equal(registry.find("nothing"), undefined);
  });

  test("a volume's life through the registry: scratch creates, loop attaches (chooseDatapath)", async (t) => {
    const srDir = await mkdtemp(join(tmpdir(), "hangar-sr-"));
    t.after(() => rm(srDir, { recursive: true, force: true }));
    const registry = await pythonRegistry();
    const scratch = registry.find("scratch", "volume");
    assert.ok(scratch);
    const dbg = "registry test";
    assert.deepEqual(await scratch.client.call("SR.create", { dbg, uuid: "sr-uuid-1", configuration: { path: srDir }, name: "SR", description: "" }), {
      path: srDir,
      uuid: "sr-uuid-1",
    });
    const sr = await scratch.client.call("SR.attach", { dbg, configuration: { path: srDir } });
    assert.equal(sr, `file://${srDir}`);
    const volume = await scratch.client.call("Volume.create", { dbg, sr, name: "disk", description: "d", size: 1048576, sharable: false });
    assert.equal(volume.virtual_size, 1048576);
    assert.equal((await stat(join(srDir, volume.key))).size, 1048576);
    // volume.stat is spelled in lower case in the fixture: lookups are case-insensitive.
    assert.deepEqual(await scratch.client.call("Volume.stat", { dbg, sr, key: volume.key }), volume);
    assert.deepEqual(await scratch.client.call("SR.ls", { dbg, sr }), [volume]);

    const { plugin, uri } = chooseDatapath(registry, volume.uri);
    assert.equal(plugin.dir, "loop");
    assert.equal(uri, `loop://${join(srDir, volume.key)}`);
    const backend = await plugin.client.call("Datapath.attach", { dbg, uri, domain: "0" });
    assert.deepEqual(backend, { implementations: [["File", { path: join(srDir, volume.key) }]] });

    await assert.rejects(scratch.client.call("Volume.stat", { dbg, sr, key: "missing" }), (error: unknown) => {
      assert.ok(error instanceof StorageError);
      assert.equal(error.errorConstructor, "Volume_does_not_exist");
      return true;
    });
  });
});

describe("chooseDatapath", () => {
  test("the first URI, in the volume's order, whose scheme has a datapath plugin", async (t) => {
    const root = await makeRoot(t, {
      "datapath/nbd/Plugin.Query": queryScript(query("nbd")),
      "datapath/file/Plugin.Query": queryScript(query("file")),
      "datapath/iscsi/Plugin.Query": queryScript(query("iscsi", "1.0")),
      "volume/org.x.nbd/Plugin.Query": queryScript(query("nbd")),
    });
    const registry = await scanPluginRoot(root);
    const chosen = chooseDatapath(registry, ["iscsi://target/lun0", "rbd://pool/img", "file:///srv/a.raw", "nbd://h/v"]);
    assert.equal(chosen.plugin.dir, "file");
    assert.equal(chosen.uri, "file:///srv/a.raw");
    assert.equal(chooseDatapath(registry, ["/dev/sda", "NBD://h/v", "file:///x"]).plugin.dir, "nbd", "schemes are case-insensitive");
    assert.equal(chooseDatapath(registry, ["nbd://h/v"]).plugin.kind, "datapath", "never a volume plugin of the same type");
  });

  test("no URI with a datapath plugin is MISSING_URI", async () => {
    const registry = await pythonRegistry();
    const uris = ["iscsi://target/lun0", "broken://x", "/dev/sda"];
    assert.throws(() => chooseDatapath(registry, uris), (error: unknown) => {
      assert.ok(error instanceof StorageError);
      assert.equal(error.code, "MISSING_URI");
      assert.deepEqual(error.params, uris);
      assert.match(error.message, /iscsi:\/\/target\/lun0, broken:\/\/x, \/dev\/sda/);
      return true;
    });
    assert.throws(() => chooseDatapath(registry, []), { code: "MISSING_URI", message: /\(no URIs\)/ });
  });

  test("uriScheme and srTypeOf", () => {
    assert.equal(uriScheme("nbd+unix:///v?socket=/s"), "nbd+unix");
    assert.equal(uriScheme("LOOP:///srv/a"), "loop");
    assert.equal(uriScheme("/dev/sda"), undefined);
    assert.equal(uriScheme("1abc://x"), undefined);
    assert.equal(srTypeOf("org.xen.xapi.storage.GFS2"), "gfs2");
    assert.equal(srTypeOf("ffs"), "ffs");
  });
});

describe("scanning", () => {
  test("a missing root and an empty root have no plugins", async (t) => {
    const empty = await makeRoot(t, {});
    for (const root of [empty, join(empty, "does-not-exist")]) {
      const registry = await scanPluginRoot(root);
      assert.deepEqual(registry.plugins, []);
      assert.deepEqual(registry.skipped, []);
      assert.equal(registry.find("anything"), undefined);
    }
    await mkdir(join(empty, "volume"));
    await mkdir(join(empty, "datapath"));
    assert.deepEqual((await scanPluginRoot(empty)).plugins, []);
  });

  test("volume plugins come first, then datapath plugins, each by directory; dot-dirs and files are ignored", async (t) => {
    const root = await makeRoot(t, {
      "datapath/nbd/Plugin.Query": queryScript(query("nbd")),
      "datapath/file/Plugin.Query": queryScript(query("file")),
      "volume/org.b.zeta/Plugin.Query": queryScript(query("zeta")),
      "volume/org.a.alpha/Plugin.Query": queryScript(query("alpha")),
      "volume/mid/Plugin.Query": queryScript(query("mid")),
      "volume/.hidden/Plugin.Query": queryScript(query("hidden")),
      "volume/README": "not a plugin",
    });
    const registry = await scanPluginRoot(root);
    assert.deepEqual(summary(registry), [
      "volume mid mid",
      "volume org.a.alpha alpha",
      "volume org.b.zeta zeta",
      "datapath file file",
      "datapath nbd nbd",
    ]);
    assert.deepEqual(registry.skipped, []);
  });

  test("a dangling symlink in the root is ignored, not fatal", async (t) => {
    const root = await makeRoot(t, { "volume/org.x.ok/Plugin.Query": queryScript(query("ok")) });
    await symlink(join(root, "removed-package"), join(root, "volume", "org.x.dangling"));
    const registry = await scanPluginRoot(root);
    assert.deepEqual(summary(registry), ["volume org.x.ok ok"]);
    assert.deepEqual(registry.skipped, []);
  });

  test("plugins are queried in parallel", async (t) => {
    const files: Record<string, string> = {};
    for (let i = 0; i < 6; i++) files[`volume/org.slow.s${i}/Plugin.Query`] = queryScript(query(`s${i}`), 0.6);
    const root = await makeRoot(t, files);
    const started = Date.now();
    const registry = await scanPluginRoot(root);
    const elapsed = Date.now() - started;
    assert.equal(registry.plugins.length, 6);
    assert.ok(elapsed < 2400, `6 plugins of 0.6 s each took ${elapsed} ms`);
  });

  test("legacy API 3.0 is accepted; other versions, failures and bad answers are skipped with the reason", async (t) => {
    const root = await makeRoot(t, {
      "volume/org.x.legacy/Plugin.Query": queryScript(query("legacy", "3.0")),
      "volume/org.x.future/Plugin.Query": queryScript(query("future", "6.0")),
      "volume/org.x.empty/SR.ls": queryScript([]),
      "volume/org.x.garbled/Plugin.Query": queryScript({ plugin: "garbled" }),
      "volume/org.x.slow/Plugin.Query": queryScript(query("slow"), 5),
    });
    const registry = await scanPluginRoot(root, { timeoutMs: 500 });
    assert.deepEqual(summary(registry), ["volume org.x.legacy legacy"]);
    const reasons = Object.fromEntries(registry.skipped.map((s) => [s.dir, s.reason]));
    assert.equal(reasons["org.x.future"], "requires API version 6.0; supported: 5.0, 3.0");
    assert.match(reasons["org.x.empty"] ?? "", /^Plugin\.Query failed: SCRIPT_MISSING: plugin org\.x\.empty does not implement Plugin\.query/);
    assert.match(reasons["org.x.garbled"] ?? "", /^Plugin\.Query failed: PLUGIN_RESULT_INVALID: .*query_result\.name/);
    assert.match(reasons["org.x.slow"] ?? "", /^Plugin\.Query failed: SCRIPT_FAILED: .*timed out after 0\.5 s/);
  });

  test("a volume plugin whose Plugin.Query names another SR type is registered with a warning", async (t) => {
    const root = await makeRoot(t, {
      "volume/org.example.storage.foo/Plugin.Query": queryScript(query("bar")),
      "volume/org.example.storage.same/Plugin.Query": queryScript(query("SAME")),
      "datapath/nbd/Plugin.Query": queryScript(query("something-else")),
    });
    const registry = await scanPluginRoot(root);
    assert.deepEqual(registry.find("org.example.storage.foo")?.warnings, [
      'Plugin.Query names the plugin "bar" but its directory gives SR type "foo"',
    ]);
    assert.equal(registry.find("foo")?.type, "foo", "the directory, not Plugin.Query, gives the SR type");
    assert.equal(registry.find("bar"), undefined);
    assert.deepEqual(registry.find("same")?.warnings, [], "the comparison ignores case");
    assert.deepEqual(registry.find("nbd")?.warnings, [], "datapath plugins are named by scheme");
  });

  test("an exact directory name wins over an SR type", async (t) => {
    const root = await makeRoot(t, {
      "volume/org.x.nbd/Plugin.Query": queryScript(query("nbd")),
      "datapath/nbd/Plugin.Query": queryScript(query("nbd")),
    });
    const registry = await scanPluginRoot(root);
    assert.equal(registry.find("nbd")?.kind, "datapath");
    assert.equal(registry.find("nbd", "volume")?.dir, "org.x.nbd");
    assert.equal(registry.find("org.x.nbd")?.kind, "volume");
  });
});

describe("plugins served over JSON-RPC (jsonrpc-endpoint)", () => {
  const daemon: PluginImplementation = {
    "Plugin.query": () => query("daemon"),
    "Plugin.ls": () => ["file:///srv/d1"],
  };

  test("a directory with a jsonrpc-endpoint file is reached over HTTP", async (t) => {
    const url = await serveJsonRpc(t, daemon);
    const root = await makeRoot(t, { "volume/org.example.daemon/jsonrpc-endpoint": `${url}\n` });
    const registry = await scanPluginRoot(root);
    assert.deepEqual(summary(registry), ["volume org.example.daemon daemon"]);
    const plugin = registry.find("daemon");
    assert.equal(plugin?.client.transport.description, `jsonrpc ${url}`);
    assert.deepEqual(await plugin?.client.call("Plugin.ls", { dbg: "t" }), ["file:///srv/d1"]);
    assert.equal(await readFile(join(root, "volume/org.example.daemon/jsonrpc-endpoint"), "utf8"), `${url}\n`);
  });

  test("or over a unix socket", async (t) => {
    const root = await makeRoot(t, {});
    const url = await serveJsonRpc(t, daemon, join(root, "daemon.sock"));
    await mkdir(join(root, "datapath", "daemon"), { recursive: true });
    await writeFile(join(root, "datapath", "daemon", "jsonrpc-endpoint"), url);
    const registry = await scanPluginRoot(root);
    assert.deepEqual(summary(registry), ["datapath daemon daemon"]);
  });

  test("an unreachable or unsupported endpoint is skipped with the reason", async (t) => {
    const root = await makeRoot(t, {
      "volume/org.x.gone/jsonrpc-endpoint": `unix://${join(tmpdir(), "hangar-no-such-dir", "x.sock")}`,
      "volume/org.x.ftp/jsonrpc-endpoint": "ftp://example.com/rpc",
    });
    const registry = await scanPluginRoot(root);
    assert.deepEqual(registry.plugins, []);
    const reasons = Object.fromEntries(registry.skipped.map((s) => [s.dir, s.reason]));
    assert.match(reasons["org.x.gone"] ?? "", /^Plugin\.Query failed: TRANSPORT_FAILED: .*ENOENT/);
    assert.match(reasons["org.x.ftp"] ?? "", /unsupported JSON-RPC endpoint ftp:\/\/example\.com\/rpc/);
  });
});

/** The features xapi-storage-script adds to every volume plugin. */
const ALWAYS: DerivedFeature[] = ["VDI_ATTACH", "VDI_DETACH", "VDI_ACTIVATE", "VDI_DEACTIVATE", "VDI_INTRODUCE"].map((feature) => ({ feature }));

describe("features: declared, derived as xapi-storage-script derives them, effective", () => {
  test("simple-file declares five, one as VDI_DESTROY; its scripts and clone-on-boot give the rest", async () => {
    const registry = await scanPluginRoot(XAPI_ROOT);
    const plugin = registry.find("simple-file");
    assert.ok(plugin);
    assert.deepEqual(plugin.query.features, ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "VDI_CREATE", "VDI_DESTROY"], "the query is kept as answered");
    assert.deepEqual(plugin.declaredFeatures, ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "VDI_CREATE", "VDI_DELETE"]);
    assert.deepEqual(plugin.derivedFeatures, [
      { feature: "SR_DELETE", script: "SR.destroy" },
      { feature: "SR_SCAN", script: "SR.ls" },
      { feature: "SR_UPDATE", script: "SR.stat" },
      { feature: "SR_PROBE", script: "SR.probe" },
      { feature: "VDI_CLONE", script: "Volume.clone" },
      { feature: "VDI_SNAPSHOT", script: "Volume.snapshot" },
      { feature: "VDI_RESIZE", script: "Volume.resize" },
      { feature: "VDI_UPDATE", script: "Volume.stat" },
      ...ALWAYS,
      { feature: "VDI_RESET_ON_BOOT/2" },
    ]);
    assert.deepEqual(plugin.features, [...plugin.declaredFeatures, ...plugin.derivedFeatures.map((d) => d.feature)]);

    const dummy = registry.find("dummyv5");
    assert.deepEqual(dummy?.declaredFeatures, ["SR_ATTACH"]);
    assert.deepEqual(dummy.derivedFeatures.map((d) => d.feature), [
      "SR_CREATE", "SR_DELETE", "SR_DETACH", "SR_SCAN", "SR_UPDATE", "VDI_CREATE", "VDI_DELETE", "VDI_UPDATE", ...ALWAYS.map((d) => d.feature),
    ], "no Volume.clone: no clone-on-boot");
  });

  test("datapath plugins keep what they declare; script lookup ignores case", async () => {
    const registry = await pythonRegistry();
    const loop = registry.find("loop", "datapath");
    assert.deepEqual([loop?.declaredFeatures, loop?.derivedFeatures, loop?.features], [["NONPERSISTENT"], [], ["NONPERSISTENT"]]);
    const scratch = registry.find("scratch");
    assert.ok(scratch);
    assert.ok(scratch.derivedFeatures.some((d) => d.feature === "VDI_UPDATE" && d.script === "Volume.stat"), "from the lower-case volume.stat");
    assert.ok(!scratch.derivedFeatures.some((d) => d.feature === "SR_ATTACH"), "declared features are not derived again");
  });

  test("only executable scripts count; a declared feature keeps its /N; duplicates go", async (t) => {
    const root = await makeRoot(t, {
      "volume/org.x.versions/Plugin.Query": queryScript({
        ...query("versions"),
        features: ["SR_SCAN/2", "VDI_DESTROY/3", "VDI_DELETE/3", "VDI_CLONE/2", "VDI_RESET_ON_BOOT", "VDI_ATTACH"],
      }),
      "volume/org.x.versions/SR.ls": queryScript([]),
      "volume/org.x.versions/Volume.destroy": queryScript(null),
      "volume/org.x.versions/sr.STAT": queryScript(null),
      "volume/org.x.versions/SR.attach": "not executable",
      "datapath/dp/Plugin.Query": queryScript({ ...query("dp"), features: ["VDI_DESTROY", "NONPERSISTENT"] }),
      "datapath/dp/SR.ls": queryScript([]),
    });
    await chmod(join(root, "volume/org.x.versions/SR.attach"), 0o644);
    await symlink(join(root, "gone.py"), join(root, "volume/org.x.versions/SR.probe"));
    const registry = await scanPluginRoot(root);
    const plugin = registry.find("versions");
    assert.deepEqual(plugin?.declaredFeatures, ["SR_SCAN/2", "VDI_DELETE/3", "VDI_CLONE/2", "VDI_RESET_ON_BOOT", "VDI_ATTACH"]);
    assert.deepEqual(plugin.derivedFeatures, [{ feature: "SR_UPDATE", script: "SR.stat" }, ...ALWAYS.filter((d) => d.feature !== "VDI_ATTACH")]);
    assert.deepEqual(registry.find("dp")?.features, ["VDI_DELETE", "NONPERSISTENT"], "a datapath plugin: the rename only");
    assert.equal(featureName("VDI_RESET_ON_BOOT/2"), "VDI_RESET_ON_BOOT");
    assert.equal(featureName("SR_SCAN"), "SR_SCAN");
  });

  test("a plugin served over JSON-RPC has no scripts: declared plus the fixed set", async (t) => {
    const url = await serveJsonRpc(t, { "Plugin.query": () => ({ ...query("daemon"), features: ["VDI_CLONE", "VDI_DESTROY"] }) });
    const root = await makeRoot(t, {
      "volume/org.x.daemon/jsonrpc-endpoint": url,
      "volume/org.x.daemon/SR.ls": queryScript([]),
    });
    const plugin = (await scanPluginRoot(root)).find("daemon");
    assert.deepEqual(plugin?.declaredFeatures, ["VDI_CLONE", "VDI_DELETE"]);
    assert.deepEqual(plugin.derivedFeatures, [...ALWAYS, { feature: "VDI_RESET_ON_BOOT/2" }], "a script beside the endpoint file is not the plugin's");
  });
});

describe("defaultPluginRoot", () => {
  test("honours HANGAR_PLUGIN_ROOT, made absolute; otherwise the bundled server/plugins", (t) => {
    const saved = process.env.HANGAR_PLUGIN_ROOT;
    t.after(() => {
      if (saved === undefined) delete process.env.HANGAR_PLUGIN_ROOT;
      else process.env.HANGAR_PLUGIN_ROOT = saved;
    });
    const bundled = resolve(import.meta.dirname, "..", "plugins");
    process.env.HANGAR_PLUGIN_ROOT = "/srv/hangar/plugins";
    assert.equal(defaultPluginRoot(), "/srv/hangar/plugins");
    process.env.HANGAR_PLUGIN_ROOT = "relative/root";
    assert.equal(defaultPluginRoot(), resolve("relative/root"));
    process.env.HANGAR_PLUGIN_ROOT = "";
    assert.equal(defaultPluginRoot(), bundled);
    delete process.env.HANGAR_PLUGIN_ROOT;
    assert.equal(defaultPluginRoot(), bundled);
  });
});
