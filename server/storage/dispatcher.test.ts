// The plugin side of the convention: runScriptEntry inside a real executable (a #!/bin/sh wrapper that runs a
// tiny .ts entry on the pinned Node), called by the way a toolstack calls it and by our exec transport.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { pathToFileURL } from "node:url";
import { createPluginClient } from "./client.ts";
import { dispatch } from "./dispatcher.ts";
import { StorageError } from "./errors.ts";
import { createExecTransport } from "./exec-transport.ts";

const NODE = resolve(import.meta.dirname, "../../node_modules/.bin/node");
const here = (file: string) => pathToFileURL(join(import.meta.dirname, file)).href;

const ENTRY = `
import { runScriptEntry } from ${JSON.stringify(here("dispatcher.ts"))};
import { storageErrors } from ${JSON.stringify(here("errors.ts"))};

const QUERY = {
  plugin: "tsfix", name: "TS fixture", description: "runScriptEntry under test", vendor: "Hangar tests",
  copyright: "", version: "1.0", required_api_version: "5.0", features: ["SR_CREATE"], configuration: {},
  required_cluster_stack: [],
};

await runScriptEntry(
  {
    "Plugin.query": () => QUERY,
    "Plugin.ls": () => Array.from({ length: 200000 }, (_, i) => "file:///srv/sr-" + i),
    "Plugin.diagnostics": () => { throw new Error("disk on fire"); },
    "SR.attach": ({ configuration }) => "file://" + configuration.path,
    "SR.detach": () => null,
    "SR.stat": async ({ sr }) => ({
      sr, name: "n", description: "", free_space: 9007199254740991, total_space: -1, datasources: [],
      clustered: false, health: ["Healthy", ""],
    }),
    "Volume.stat": ({ key }) => { throw storageErrors.volumeDoesNotExist(key); },
    "Volume.create": () => ({ key: "k", name: "n", description: "", read_write: true, sharable: false,
      virtual_size: 1.5, physical_utilisation: 0, uri: [], keys: {} }),
  },
  process.argv[2] ?? "",
);
`;

const METHOD_LINKS = [
  "Plugin.Query",
  "Plugin.ls",
  "Plugin.diagnostics",
  "SR.attach",
  "SR.detach",
  "SR.stat",
  "Volume.stat",
  "Volume.create",
  "Volume.destroy",
  "Foo.bar",
];

let dir = "";

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "hangar-entry-"));
  await writeFile(join(dir, "package.json"), '{"type":"module"}\n');
  await writeFile(join(dir, "entry.ts"), ENTRY);
  await writeFile(join(dir, "entry.sh"), `#!/bin/sh\nexec ${JSON.stringify(NODE)} ${JSON.stringify(join(dir, "entry.ts"))} "$(basename "$0")" "$@"\n`, { mode: 0o755 });
  for (const name of METHOD_LINKS) await symlink("entry.sh", join(dir, name));
});
after(() => rm(dir, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(script: string, stdin: string): Promise<Run> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(join(dir, script), ["--json"], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolvePromise({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

/** A failed run: exit 1, stdout exactly one line holding an error object and nothing else. */
function errorObject(result: Run): { code: string; params: string[]; backtrace: { error: string; files: unknown[]; lines: unknown[] } } {
  assert.equal(result.code, 1, `exit code (stderr: ${result.stderr})`);
  assert.ok(result.stdout.endsWith("\n"));
  assert.equal(result.stdout.trimEnd().split("\n").length, 1, "stdout is one line");
  assert.doesNotMatch(result.stdout, /\bat .*\.ts:\d+/, "no stack trace on stdout");
  const value = JSON.parse(result.stdout);
  assert.deepEqual(Object.keys(value), ["code", "params", "backtrace"]);
  return value;
}

describe("runScriptEntry in a real executable", { concurrency: true }, () => {
  test("success: stdout is only the bare result JSON, exit 0", async () => {
    const result = await run("Plugin.Query", '{"dbg":"t"}\n');
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"plugin":"tsfix","name":"TS fixture","description":"runScriptEntry under test","vendor":"Hangar tests","copyright":"","version":"1.0","required_api_version":"5.0","features":["SR_CREATE"],"configuration":{},"required_cluster_stack":[]}\n');
    assert.doesNotMatch(result.stderr, /Error/);
  });

  test("a method without a result prints null", async () => {
    const result = await run("SR.detach", '{"dbg":"t","sr":"file:///srv/sr1"}');
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, "null\n");
  });

  test("params are decoded by the method table (keys case-insensitive, ints exact)", async () => {
    const attach = await run("SR.attach", '{"DBG":"t","Configuration":{"path":"/srv/sr9"}}');
    assert.equal(attach.stdout, '"file:///srv/sr9"\n');
    const stat = await run("SR.stat", '{"dbg":"t","sr":"file:///srv/sr1"}');
    assert.equal(stat.code, 0, stat.stderr);
    assert.equal(
      stat.stdout,
      '{"sr":"file:///srv/sr1","name":"n","description":"","free_space":9007199254740991,"total_space":-1,"datasources":[],"clustered":false,"health":["Healthy",""]}\n',
    );
  });

  test("a large result is flushed whole before the process exits", async () => {
    const result = await run("Plugin.ls", '{"dbg":"t"}');
    assert.equal(result.code, 0, result.stderr);
    const srs = JSON.parse(result.stdout) as string[];
    assert.equal(srs.length, 200000);
    assert.equal(srs.at(-1), "file:///srv/sr-199999");
  });

  test("an interface error is the error object on stdout and exit 1; the stack goes to stderr", async () => {
    const result = await run("Volume.stat", '{"dbg":"t","sr":"file:///srv/sr1","key":"v9"}');
    const error = errorObject(result);
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params, ["Volume_does_not_exist", "v9"]);
    assert.deepEqual(error.backtrace, { error: "SR_BACKEND_FAILURE: Volume_does_not_exist, v9", files: [], lines: [] });
    assert.match(result.stderr, /StorageError: SR_BACKEND_FAILURE: Volume_does_not_exist, v9\n\s+at /);
  });

  test("any other exception becomes SR_BACKEND_FAILURE with its message", async () => {
    const error = errorObject(await run("Plugin.diagnostics", '{"dbg":"t"}'));
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params, ["disk on fire"]);
  });

  test("a method the implementation lacks, or no method at all, is Unimplemented", async () => {
    const missing = errorObject(await run("Volume.destroy", '{"dbg":"t","sr":"s","key":"k"}'));
    assert.deepEqual(missing.params, ["Unimplemented", "Volume.destroy"]);
    const unknown = errorObject(await run("Foo.bar", '{"dbg":"t"}'));
    assert.deepEqual(unknown.params, ["Unimplemented", "Foo.bar"]);
  });

  test("stdin that is not JSON, or empty, is an error object, not a crash", async () => {
    for (const stdin of ["{not json", ""]) {
      const result = await run("Plugin.Query", stdin);
      const error = errorObject(result);
      assert.equal(error.code, "SR_BACKEND_FAILURE");
      assert.deepEqual(error.params, ["parameters on stdin are not valid JSON"]);
      assert.match(result.stderr, /Plugin\.Query: stdin is not JSON/);
    }
  });

  test("params of the wrong shape are refused, naming the field", async () => {
    const error = errorObject(await run("SR.stat", '{"dbg":"t"}'));
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.match(error.params[0] ?? "", /^invalid parameters: sr: /);
    const notObject = errorObject(await run("SR.stat", "[1,2]"));
    assert.match(notObject.params[0] ?? "", /^invalid parameters: /);
  });

  test("a result of the wrong type is not checked again in the plugin, and the caller's client refuses it", async () => {
    const params = { dbg: "t", sr: "s", name: "n", description: "", size: 1, sharable: false };
    const result = await run("Volume.create", JSON.stringify(params));
    assert.equal(result.code, 0);
    assert.match(result.stdout, /"virtual_size":1\.5/);
    const client = createPluginClient("tsfix", createExecTransport(dir, "tsfix"));
    await assert.rejects(client.call("Volume.create", params), (error: unknown) => {
      assert.ok(error instanceof StorageError);
      assert.equal(error.code, "PLUGIN_RESULT_INVALID");
      assert.match(error.message, /volume\.virtual_size: expected int64, got 1\.5/);
      return true;
    });
  });

  test("our exec transport and client talk to it", async () => {
    const client = createPluginClient("tsfix", createExecTransport(dir, "tsfix"));
    assert.equal((await client.call("Plugin.query", { dbg: "t" })).plugin, "tsfix");
    assert.equal(await client.call("SR.attach", { dbg: "t", configuration: { path: "/srv/x" } }), "file:///srv/x");
    await assert.rejects(client.call("Volume.stat", { dbg: "t", sr: "s", key: "v1" }), (error: unknown) => {
      assert.ok(error instanceof StorageError);
      assert.equal(error.errorConstructor, "Volume_does_not_exist");
      assert.deepEqual(error.detail, ["v1"]);
      return true;
    });
  });
});

describe("dispatch", () => {
  test("never throws; every failure is an error object", async () => {
    const impl = { "SR.detach": () => null };
    assert.deepEqual(await dispatch(impl, "sr.DETACH", { dbg: "t", sr: "s" }), { ok: true, json: "null" });
    for (const [method, params] of [["SR.detach", undefined], ["SR.detach", "text"], ["", {}], ["SR.ls", { dbg: "t", sr: "s" }]] as const) {
      const outcome = await dispatch(impl, method, params);
      assert.equal(outcome.ok, false, `${method} ${JSON.stringify(params)}`);
      assert.equal(JSON.parse(outcome.json).code, "SR_BACKEND_FAILURE");
    }
  });

  test("a thrown non-Error value is reported as text", async () => {
    const outcome = await dispatch({ "Plugin.ls": () => { throw "plain string"; } }, "Plugin.ls", { dbg: "t" });
    assert.equal(outcome.ok, false);
    assert.deepEqual(JSON.parse(outcome.json).params, ["plain string"]);
  });

  test("a StorageError of any code passes through unchanged", async () => {
    const failure = new StorageError("SR_BACKEND_FAILURE_42", ["free", "form"]);
    const outcome = await dispatch({ "Plugin.ls": async () => Promise.reject(failure) }, "Plugin.ls", { dbg: "t" });
    assert.equal(outcome.ok, false);
    assert.equal(outcome.ok === false && outcome.error, failure);
    assert.deepEqual(JSON.parse(outcome.json), { code: "SR_BACKEND_FAILURE_42", params: ["free", "form"], backtrace: { error: failure.message, files: [], lines: [] } });
  });
});
