import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import type { BundleManifest } from "./bundle-freshness.ts";
import { bundleIsFresh } from "./bundle-freshness.ts";
import { bundlePlugin } from "./bundle.ts";

const VOLUME_PLUGIN = resolve(import.meta.dirname, "../volume/org.xen.xapi.storage.file");
const dir = mkdtempSync(join(tmpdir(), "hangar-bundle-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs a bundle's plugin.mjs as the entry does; `typeScript: false` makes any .ts import fail. */
function runBundle(bundle: string, method: string, input: object, options: { typeScript?: boolean } = {}) {
  const flags = options.typeScript === false ? ["--no-experimental-strip-types"] : [];
  return spawnSync(process.execPath, [...flags, join(bundle, "plugin.mjs"), method, "--json"], {
    input: JSON.stringify(input),
    encoding: "utf8",
    env: { ...process.env, HANGAR_DATA_DIR: join(dir, "data") },
  });
}

describe("bundleIsFresh", () => {
  test("true while every input keeps its mtime and size; false when one changes, goes or the manifest is missing", () => {
    const input = join(dir, "input.ts");
    writeFileSync(input, "export const x = 1;\n");
    const manifestFile = join(dir, "manifest.json");
    const write = () => {
      const stat = statSync(input);
      const manifest: BundleManifest = { inputs: [[input, stat.mtimeMs, stat.size]] };
      writeFileSync(manifestFile, JSON.stringify(manifest));
    };
    write();
    const url = pathToFileURL(manifestFile);
    assert.equal(bundleIsFresh(url), true);
    utimesSync(input, new Date(), new Date(Date.now() + 5000));
    assert.equal(bundleIsFresh(url), false);
    write();
    writeFileSync(input, "export const x = 22;\n");
    assert.equal(bundleIsFresh(url), false);
    rmSync(input);
    assert.equal(bundleIsFresh(url), false);
    assert.equal(bundleIsFresh(pathToFileURL(join(dir, "no-such-manifest.json"))), false);
  });
});

describe("the volume plugin's bundle", () => {
  let copy: string;
  before(async () => {
    await bundlePlugin(VOLUME_PLUGIN);
    // A private copy of the build: tampering with it cannot disturb other tests calling the plugin.
    copy = join(dir, "build");
    cpSync(realpathSync(join(VOLUME_PLUGIN, ".bundle", "current")), copy, { recursive: true });
  });

  test("the entry script runs the build that `current` points at, and it is fresh", () => {
    const current = realpathSync(join(VOLUME_PLUGIN, ".bundle", "current"));
    assert.equal(bundleIsFresh(pathToFileURL(join(current, "manifest.json"))), true);
    const result = spawnSync(join(VOLUME_PLUGIN, "Plugin.Query"), ["--json"], { input: '{"dbg":"t"}', encoding: "utf8" });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).plugin, "file");
  });

  test("the entry script keeps Node's compile cache out of the data dir: a call whose data dir is gone makes nothing there", () => {
    // As a task's late call after a test removed its host: the cache once brought back <data dir>/run/compile-cache.
    const gone = join(dir, "removed-data-dir");
    const { NODE_COMPILE_CACHE: _inherited, ...env } = process.env;
    const result = spawnSync(join(VOLUME_PLUGIN, "Plugin.Query"), ["--json"], { input: '{"dbg":"t"}', encoding: "utf8", env: { ...env, HANGAR_DATA_DIR: gone } });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(existsSync(gone), false);
  });

  test("a fresh bundle loads no TypeScript: it runs with type stripping turned off", () => {
    const result = runBundle(copy, "Plugin.Query", { dbg: "t" }, { typeScript: false });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).required_api_version, "5.0");
  });

  test("Plugin.Query loads nothing but its own chunk: it answers with the methods chunk gone", () => {
    const lean = join(dir, "lean");
    cpSync(copy, lean, { recursive: true });
    for (const file of readdirSync(lean)) if (file.startsWith("methods-")) rmSync(join(lean, file));
    assert.equal(runBundle(lean, "Plugin.Query", { dbg: "t" }).status, 0);
    const ls = runBundle(lean, "SR.ls", { dbg: "t", sr: `file://${dir}/no-sr` });
    assert.equal(ls.status, 1);
  });

  test("with a source changed since the build, the call runs the sources and still answers right", () => {
    const stale = join(dir, "stale");
    cpSync(copy, stale, { recursive: true });
    const manifestFile = join(stale, "manifest.json");
    const manifest = JSON.parse(readFileSync(manifestFile, "utf8")) as BundleManifest;
    manifest.inputs[0]![1] -= 1000;
    writeFileSync(manifestFile, JSON.stringify(manifest));
    // The sources are TypeScript: with type stripping off, falling back to them fails, which proves it does.
    assert.notEqual(runBundle(stale, "Plugin.Query", { dbg: "t" }, { typeScript: false }).status, 0);
    const result = runBundle(stale, "Plugin.Query", { dbg: "t" });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(JSON.parse(result.stdout).plugin, "file");
  });

  test("the nbd datapath's volume daemon is bundled too, and loads no TypeScript", () => {
    const nbd = realpathSync(resolve(import.meta.dirname, "../datapath/nbd/.bundle/current"));
    // Without its volume URI it stops at its usage line: everything it imports has loaded by then.
    const result = spawnSync(process.execPath, ["--no-experimental-strip-types", join(nbd, "daemon.mjs")], { encoding: "utf8", env: { ...process.env, HANGAR_DATA_DIR: join(dir, "data") } });
    assert.notEqual(result.status, 0);
    assert.match(result.stderr, /usage: daemon\.ts <volume URI>/);
  });

  test("params are still checked in the bundle; an unknown method is Unimplemented", () => {
    const bad = runBundle(copy, "SR.stat", { dbg: "t" });
    assert.equal(bad.status, 1);
    assert.match(JSON.parse(bad.stdout).params[0], /^invalid parameters: sr: /);
    const unknown = runBundle(copy, "Volume.frobnicate", { dbg: "t" });
    assert.deepEqual(JSON.parse(unknown.stdout).params, ["Unimplemented", "Volume.frobnicate"]);
  });
});
