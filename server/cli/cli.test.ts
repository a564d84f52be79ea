// `bin/hangar` as a user runs it: a real process against the Python fixture root and roots built per test.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { type TestContext, describe, test } from "node:test";
import { METHOD_NAMES } from "../storage/interface.ts";

const HANGAR = resolve(import.meta.dirname, "../../bin/hangar");
const PYTHON_ROOT = resolve(import.meta.dirname, "../storage/fixtures/python-root");
const XAPI_ROOT = resolve(import.meta.dirname, "../storage/fixtures/xapi-root");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function hangar(args: string[], options: { root?: string; cwd?: string; command?: string } = {}): Promise<Run> {
  return new Promise((done, fail) => {
    const env = { ...process.env, HANGAR_PLUGIN_ROOT: options.root ?? PYTHON_ROOT };
    const child = spawn(options.command ?? HANGAR, args, { env, cwd: options.cwd ?? tmpdir(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** A successful run's stdout, parsed. */
function json(run: Run): unknown {
  assert.equal(run.code, 0, `exit code (stderr: ${run.stderr})`);
  return JSON.parse(run.stdout);
}

async function tempDir(t: TestContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const QUERY = JSON.stringify({
  plugin: "echo",
  name: "Echo",
  description: "prints its params back",
  vendor: "Hangar tests",
  copyright: "",
  version: "1",
  required_api_version: "5.0",
  features: [],
  configuration: {},
  required_cluster_stack: [],
});

/** A plugin root with one volume plugin `org.x.echo`: Plugin.diagnostics returns its stdin as a string. */
async function echoRoot(t: TestContext): Promise<string> {
  const root = await tempDir(t, "hangar-cli-root-");
  const dir = join(root, "volume", "org.x.echo");
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "Plugin.Query"), `#!/bin/sh\ncat > /dev/null\ncat <<'EOF'\n${QUERY}\nEOF\n`, { mode: 0o755 });
  await writeFile(join(dir, "Plugin.diagnostics"), '#!/usr/bin/env python3\nimport json, sys\nprint(json.dumps(sys.stdin.read()))\n', { mode: 0o755 });
  await writeFile(join(dir, "Plugin.ls"), "#!/bin/sh\ncat > /dev/null\nsleep 30\necho '[]'\n", { mode: 0o755 });
  return root;
}

// Suites and tests run side by side: each one is mostly waiting on child processes.
describe("bin/hangar", { concurrency: 3 }, () => {
  describe("help", { concurrency: true }, () => {
    test("hangar --help lists the commands; no command at all is a usage error", async () => {
      const flags = ["--help", "help"];
      const runs = await Promise.all(flags.map((flag) => hangar([flag])));
      for (const run of runs) {
        assert.equal(run.code, 0);
        assert.match(run.stdout, /^hangar — drive SMAPIv3/);
        for (const command of ["plugins", "call", "methods"]) assert.match(run.stdout, new RegExp(`^  ${command} +\\S`, "m"));
        assert.match(run.stdout, /HANGAR_PLUGIN_ROOT/);
      }
      const bare = await hangar([]);
      assert.equal(bare.code, 2);
      assert.match(bare.stdout, /Usage: hangar <command>/);
    });

    test("--help on every command prints its usage and exits 0", async () => {
      const invocations = [["plugins", "--help"], ["call", "--help"], ["methods", "--help"], ["call", "-h"]];
      const runs = await Promise.all(invocations.map((args) => hangar(args)));
      invocations.forEach(([command, flag], i) => {
        const run = runs[i] as Run;
        assert.equal(run.code, 0, `${command} ${flag}`);
        assert.ok(run.stdout.startsWith(`Usage: hangar ${command}`), run.stdout);
        assert.equal(run.stderr, "");
      });
    });
  });

  describe("hangar plugins", { concurrency: true }, () => {
    test("prints a table of registered plugins and the skipped ones with the reason", async () => {
      const run = await hangar(["plugins"]);
      assert.equal(run.code, 0, run.stderr);
      const lines = run.stdout.split("\n");
      assert.equal(lines[0], `Plugin root: ${PYTHON_ROOT}`);
      assert.ok(lines.includes("volume scratch  (org.example.storage.scratch)"));
      assert.ok(lines.includes("  name:         Scratch SR — Raw files in a directory (Python test fixture)"));
      assert.ok(lines.includes("  version:      1.2.3   vendor: Example Storage Co   requires API 5.0"));
      assert.ok(lines.includes("  declared:     SR_ATTACH SR_DETACH SR_CREATE SR_PROBE SR_STATS VDI_CREATE VDI_DELETE VDI_SNAPSHOT"));
      assert.ok(lines.includes("  derived:      SR_SCAN (SR.ls), SR_UPDATE (SR.stat), VDI_UPDATE (Volume.stat), VDI_ATTACH (toolstack), VDI_DETACH (toolstack), VDI_ACTIVATE (toolstack), VDI_DEACTIVATE (toolstack), VDI_INTRODUCE (toolstack)"));
      assert.ok(lines.includes("  declared:     NONPERSISTENT"));
      assert.equal(lines.filter((line) => line.startsWith("  derived:")).length, 1, "a datapath plugin has no derived features");
      assert.ok(lines.includes("    path: Directory that holds the SR"));
      assert.ok(lines.includes("datapath loop  (loop)"));
      assert.ok(lines.includes("  configuration: (none)"));
      assert.ok(lines.indexOf("volume scratch  (org.example.storage.scratch)") < lines.indexOf("datapath loop  (loop)"));
      const skipped = lines.indexOf("Skipped:");
      assert.ok(skipped > 0);
      assert.deepEqual(lines.slice(skipped + 1, skipped + 3), [
        "  volume org.example.storage.ancient: requires API version 2.0; supported: 5.0, 3.0",
        "  datapath broken: Plugin.Query failed: SR_BACKEND_FAILURE: cannot load kernel module nbd",
      ]);
    });

    test("--json prints the same as data", async () => {
      const data = json(await hangar(["plugins", "--json"])) as {
        root: string;
        plugins: Array<Record<string, unknown>>;
        skipped: Array<Record<string, unknown>>;
      };
      assert.equal(data.root, PYTHON_ROOT);
      assert.deepEqual(
        data.plugins.map((p) => [p.kind, p.dir, p.type, p.plugin, p.version]),
        [
          ["volume", "org.example.storage.scratch", "scratch", "scratch", "1.2.3"],
          ["datapath", "loop", "loop", "loop", "0.9"],
        ],
      );
      assert.deepEqual(data.plugins[0]?.warnings, []);
      assert.equal(data.plugins[0]?.path, join(PYTHON_ROOT, "volume", "org.example.storage.scratch"));
      assert.equal(data.plugins[0]?.required_api_version, "5.0");
      assert.deepEqual(
        data.skipped.map((s) => [s.kind, s.dir]),
        [
          ["volume", "org.example.storage.ancient"],
          ["datapath", "broken"],
        ],
      );
      assert.match(String(data.skipped[1]?.reason), /cannot load kernel module nbd/);
    });

    test("declared and derived features apart: xapi's spelling VDI_DESTROY is read as VDI_DELETE", async () => {
      const [table, data] = await Promise.all([hangar(["plugins", "--root", XAPI_ROOT]), hangar(["plugins", "--root", XAPI_ROOT, "--json"])]);
      assert.equal(table.code, 0, table.stderr);
      const lines = table.stdout.split("\n");
      const at = lines.indexOf("volume simple-file  (org.xen.xapi.storage.simple-file)");
      assert.ok(at > 0, table.stdout);
      assert.equal(lines[at + 3], "  declared:     SR_ATTACH SR_DETACH SR_CREATE VDI_CREATE VDI_DELETE");
      assert.equal(
        lines[at + 4],
        "  derived:      SR_DELETE (SR.destroy), SR_SCAN (SR.ls), SR_UPDATE (SR.stat), SR_PROBE (SR.probe), VDI_CLONE (Volume.clone), " +
          "VDI_SNAPSHOT (Volume.snapshot), VDI_RESIZE (Volume.resize), VDI_UPDATE (Volume.stat), VDI_ATTACH (toolstack), VDI_DETACH (toolstack), " +
          "VDI_ACTIVATE (toolstack), VDI_DEACTIVATE (toolstack), VDI_INTRODUCE (toolstack), VDI_RESET_ON_BOOT/2 (toolstack)",
      );

      const plugins = (json(data) as { plugins: Array<{ type: string; features: string[]; declaredFeatures: string[]; derivedFeatures: { feature: string; script?: string }[] }> }).plugins;
      const simpleFile = plugins.find((p) => p.type === "simple-file");
      assert.ok(simpleFile);
      assert.deepEqual(simpleFile.declaredFeatures, ["SR_ATTACH", "SR_DETACH", "SR_CREATE", "VDI_CREATE", "VDI_DELETE"]);
      assert.deepEqual(simpleFile.derivedFeatures.slice(0, 2), [{ feature: "SR_DELETE", script: "SR.destroy" }, { feature: "SR_SCAN", script: "SR.ls" }]);
      assert.deepEqual(simpleFile.derivedFeatures.at(-1), { feature: "VDI_RESET_ON_BOOT/2" });
      assert.deepEqual(simpleFile.features, [...simpleFile.declaredFeatures, ...simpleFile.derivedFeatures.map((d) => d.feature)], "features: the effective list");
      assert.deepEqual(plugins.find((p) => p.type === "loop")?.derivedFeatures, []);
    });

    test("--root wins over HANGAR_PLUGIN_ROOT; an empty root has no plugins", async (t) => {
      const empty = await tempDir(t, "hangar-cli-empty-");
      const [run, viaRootRun] = await Promise.all([
        hangar(["plugins", "--root", empty]),
        hangar(["plugins", "--json", "--root", PYTHON_ROOT], { root: empty }),
      ]);
      assert.equal(run.code, 0);
      assert.match(run.stdout, new RegExp(`^Plugin root: ${empty}\n\nNo plugins registered\\.`));
      const viaRoot = json(viaRootRun) as { plugins: unknown[] };
      assert.equal(viaRoot.plugins.length, 2);
    });
  });

  describe("hangar call", { concurrency: true }, () => {
    test("drives an SR and its volumes through the fixture plugins", async (t) => {
      const srDir = await tempDir(t, "hangar-cli-sr-");
      const created = json(
        await hangar(["call", "scratch", "SR.create", JSON.stringify({ uuid: "sr-1", configuration: { path: srDir }, name: "CLI SR", description: "made by a test" })]),
      );
      assert.deepEqual(created, { path: srDir, uuid: "sr-1" });
      const sr = json(await hangar(["call", "scratch", "SR.attach", JSON.stringify({ configuration: { path: srDir } })])) as string;
      assert.equal(sr, `file://${srDir}`);
      const volume = json(
        await hangar(["call", "org.example.storage.scratch", "Volume.create", JSON.stringify({ sr, name: "disk", description: "", size: 4194304, sharable: false })]),
      ) as { key: string; virtual_size: number; uri: string[]; read_write: boolean };
      assert.equal(volume.virtual_size, 4194304);
      assert.equal(volume.read_write, true);
      const uri = volume.uri[0] ?? "";
      // Independent reads of the same SR: one process each, side by side.
      const [listRun, statRun, attachRun, openRun, srStatRun] = await Promise.all([
        hangar(["call", "scratch", "sr.ls", JSON.stringify({ sr })]),
        hangar(["call", "SCRATCH", "Volume.stat", JSON.stringify({ sr, key: volume.key })]),
        hangar(["call", "loop", "Datapath.attach", JSON.stringify({ uri, domain: "0" })]),
        hangar(["call", "loop", "Datapath.open", JSON.stringify({ uri, persistent: true })]),
        hangar(["call", "scratch", "SR.stat", JSON.stringify({ sr })]),
      ]);
      assert.deepEqual(json(listRun), [volume]);
      assert.deepEqual(json(statRun), volume);
      assert.equal(statRun.stdout, `${JSON.stringify(volume, null, 2)}\n`, "pretty-printed JSON");
      assert.deepEqual(json(attachRun), { implementations: [["File", { path: join(srDir, volume.key) }]] });
      assert.equal(json(openRun), null);
      const stat = json(srStatRun) as { name: string; health: unknown; uuid: string };
      assert.equal(stat.name, "CLI SR");
      assert.equal(stat.uuid, "sr-1");
      assert.deepEqual(stat.health, ["Healthy", ""]);
    });

    test("dbg is filled in when absent and kept when given; params default to {}", async (t) => {
      const root = await echoRoot(t);
      const [filled, defaulted, given] = await Promise.all([
        hangar(["call", "echo", "Plugin.diagnostics", "{}"], { root }),
        hangar(["call", "echo", "Plugin.diagnostics"], { root }),
        hangar(["call", "echo", "Plugin.diagnostics", '{"dbg":"mine"}'], { root }),
      ]);
      assert.equal(json(filled), '{"dbg":"hangar call Plugin.diagnostics"}\n');
      assert.equal(json(defaulted), '{"dbg":"hangar call Plugin.diagnostics"}\n');
      assert.equal(json(given), '{"dbg":"mine"}\n');
    });

    test("a plugin error prints code and params on stderr and exits 1", async () => {
      const [missingSr, unimplemented, badParams] = await Promise.all([
        hangar(["call", "scratch", "Volume.stat", '{"sr":"file:///nonexistent/sr","key":"k"}']),
        hangar(["call", "scratch", "Volume.clone", '{"sr":"s","key":"k"}']),
        hangar(["call", "scratch", "SR.ls", '{"sr":5}']),
      ]);
      assert.equal(missingSr.code, 1);
      assert.equal(missingSr.stdout, "");
      assert.equal(missingSr.stderr.split("\n")[0], 'SR_BACKEND_FAILURE ["SR_does_not_exist","file:///nonexistent/sr"]');
      assert.equal(unimplemented.code, 1);
      assert.match(unimplemented.stderr, /^SCRIPT_MISSING \[".*\/org\.example\.storage\.scratch\/Volume\.clone"\]\n/);
      assert.equal(badParams.code, 1);
      assert.match(badParams.stderr, /^INCORRECT_PARAMETERS \["SR\.ls","sr: /);
    });

    test("an unknown or skipped plugin exits 1 and says why", async () => {
      const [unknown, skipped, byType] = await Promise.all([
        hangar(["call", "nope", "Plugin.query"]),
        hangar(["call", "broken", "Plugin.query"]),
        hangar(["call", "Ancient", "Plugin.query"]),
      ]);
      assert.equal(unknown.code, 1);
      assert.equal(unknown.stderr, `hangar call: no plugin "nope" in ${PYTHON_ROOT}\n`);
      assert.equal(skipped.code, 1);
      assert.match(skipped.stderr, /^hangar call: plugin broken was skipped: Plugin\.Query failed: SR_BACKEND_FAILURE: cannot load kernel module nbd/);
      assert.equal(byType.code, 1);
      assert.equal(byType.stderr, "hangar call: plugin Ancient was skipped: requires API version 2.0; supported: 5.0, 3.0\n");
    });

    test("--timeout kills a plugin that hangs", async (t) => {
      const root = await echoRoot(t);
      // Long enough for Plugin.Query (which the same limit applies to) on a machine loaded by the other tests.
      const run = await hangar(["call", "--timeout", "3", "echo", "Plugin.ls"], { root });
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^SCRIPT_FAILED .*timed out after 3 s; its process group was killed/);
    });

    test("usage errors exit 2 with the message and the command's help", async () => {
      const cases: Array<[string[], RegExp]> = [
        [["call"], /needs <plugin> and <Interface\.method>/],
        [["call", "scratch", "Volume.frobnicate"], /unknown method "Volume\.frobnicate"/],
        [["call", "scratch", "SR.ls", "{bad"], /params-json is not valid JSON/],
        [["call", "scratch", "SR.ls", "[1]"], /params-json must be a JSON object/],
        [["call", "scratch", "SR.ls", "{}", "extra"], /unexpected argument "extra"/],
        [["call", "--bogus", "scratch", "SR.ls"], /--bogus/],
        [["call", "--timeout", "soon", "scratch", "SR.ls"], /--timeout must be a positive number/],
        [["plugins", "extra"], /unexpected argument "extra"/],
        [["plugins", "--timeout", "1e9"], /--timeout must be a positive number of seconds up to 2147483/],
        [["methods", "Nope"], /unknown interface "Nope"/],
      ];
      const runs = await Promise.all(cases.map(([args]) => hangar(args)));
      cases.forEach(([args, message], i) => {
        const run = runs[i] as Run;
        assert.equal(run.code, 2, `${args.join(" ")}: ${run.stderr}`);
        assert.match(run.stderr, message, args.join(" "));
        assert.match(run.stderr, new RegExp(`^hangar ${args[0]}: .*\n\nUsage: hangar ${args[0]}`, "s"), args.join(" "));
        assert.equal(run.stdout, "");
      });
      const unknownCommand = await hangar(["frobnicate"]);
      assert.equal(unknownCommand.code, 2);
      assert.match(unknownCommand.stderr, /^hangar: unknown command "frobnicate"\n\nhangar — drive/);
    });
  });

  describe("hangar methods", { concurrency: true }, () => {
    test("lists every method with params, result and feature", async () => {
      const run = await hangar(["methods"]);
      assert.equal(run.code, 0);
      for (const name of METHOD_NAMES) assert.match(run.stdout, new RegExp(`^  ${name.replace(".", "\\.")}\\(dbg: string`, "m"), name);
      assert.match(run.stdout, /^  SR\.ls\(dbg: string, sr: sr\) -> volumes {2}\[SR_SCAN\]$/m);
      assert.match(run.stdout, /^  Data\.copy\(dbg: string, uri: uri, domain: domain, remote: uri, blocklist: blocklist\) -> operation$/m);
      assert.match(run.stdout, /^  Datapath\.open\(dbg: string, uri: uri, persistent: persistent\) -> unit$/m);
      assert.match(run.stdout, /^ {6}Lists the volumes of an attached SR\.$/m);
      const headers = run.stdout.split("\n").filter((line) => /^\S/.test(line));
      assert.deepEqual(headers, ["Plugin", "Datapath", "Data", "SR", "Volume"]);
    });

    test("--markdown prints a table per interface", async () => {
      const run = await hangar(["methods", "--markdown"]);
      assert.equal(run.code, 0);
      assert.equal(run.stdout.match(/^## /gm)?.length, 5);
      assert.match(run.stdout, /^## Volume\n\n\| Method \| Parameters \| Result \| Feature \| Description \|\n\|---\|---\|---\|---\|---\|$/m);
      assert.match(
        run.stdout,
        /^\| `Volume\.list_changed_blocks` \| dbg: string, sr: sr, key: key, key2: key, offset: int64, length: int64 \| changed_blocks \| VDI_CONFIG_CBT \| .+ \|$/m,
      );
      assert.match(run.stdout, /^\| `Plugin\.query` \| dbg: string \| query_result \| {2}\| .+ \|$/m);
      for (const name of METHOD_NAMES) assert.ok(run.stdout.includes(`| \`${name}\` |`), name);
    });

    test("an interface name narrows the list, case-insensitively", async () => {
      const run = await hangar(["methods", "datapath"]);
      assert.equal(run.code, 0);
      const listed = [...run.stdout.matchAll(/^ {2}(\S+)\(/gm)].map((m) => m[1]);
      assert.deepEqual(listed, METHOD_NAMES.filter((m) => m.startsWith("Datapath.")));
    });
  });

  describe("the launcher", { concurrency: true }, () => {
    test("works through a symlink and from any directory", async (t) => {
      const dir = await tempDir(t, "hangar-cli-bin-");
      await symlink(HANGAR, join(dir, "hangar"));
      const run = await hangar(["methods", "Plugin"], { command: join(dir, "hangar"), cwd: dirname(dir) });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /^Plugin\n {2}Plugin\.query\(dbg: string\) -> query_result/);
    });
  });
});
