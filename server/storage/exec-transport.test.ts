// The xapi-storage-script calling convention against real executables written by each test into a temp dir.
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type TestContext, describe, test } from "node:test";
import { createPluginClient } from "./client.ts";
import { encodeParams } from "./codec.ts";
import { StorageError } from "./errors.ts";
import { createExecTransport, findScript } from "./exec-transport.ts";

const QUERY = {
  plugin: "shfix",
  name: "Shell fixture",
  description: "written by a test",
  vendor: "Hangar tests",
  copyright: "",
  version: "0.0.1",
  required_api_version: "5.0",
  features: ["SR_ATTACH"],
  configuration: { path: "where" },
  required_cluster_stack: [],
};

/** A plugin directory of sh scripts (name → body without the #! line), removed after the test. */
async function pluginDir(t: TestContext, scripts: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hangar-exec-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  for (const [name, body] of Object.entries(scripts)) {
    await writeFile(join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  }
  return dir;
}

/** Prints `json` as the result after consuming stdin, as a well-behaved script does. */
const prints = (json: string) => `cat > /dev/null\ncat <<'EOF'\n${json}\nEOF`;
const fails = (json: string, code = 1) => `${prints(json)}\nexit ${code}`;

async function rejection(promise: Promise<unknown>): Promise<StorageError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof StorageError, `expected a StorageError, got ${String(error)}`);
    return error;
  }
  assert.fail("expected the call to fail");
}

/** Alive and not a zombie (an orphan may wait a moment for a reaper). */
async function isRunning(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

async function waitUntilGone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!(await isRunning(pid))) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return !(await isRunning(pid));
}

describe("success", () => {
  test("the bare result on stdout is the parsed result", async (t) => {
    const dir = await pluginDir(t, { "Plugin.Query": prints(JSON.stringify(QUERY)) });
    const transport = createExecTransport(dir, "shfix");
    assert.equal(transport.description, `exec ${dir}`);
    assert.deepEqual(await transport.invoke("Plugin.query", '{"dbg":"t"}'), QUERY);
    const client = createPluginClient("shfix", transport);
    assert.deepEqual(await client.call("Plugin.query", { dbg: "t" }), QUERY);
  });

  test("null is the result of a method without one; numbers keep their exactness", async (t) => {
    const dir = await pluginDir(t, {
      "SR.detach": prints("null"),
      "Volume.stat": prints('{"key":"k","name":"n","description":"","read_write":true,"sharable":false,"virtual_size":9007199254740993,"physical_utilisation":0,"uri":[],"keys":{}}'),
    });
    const client = createPluginClient("shfix", createExecTransport(dir, "shfix"));
    assert.equal(await client.call("SR.detach", { dbg: "t", sr: "s" }), null);
    const error = await rejection(client.call("Volume.stat", { dbg: "t", sr: "s", key: "k" }));
    assert.equal(error.code, "PLUGIN_RESULT_INVALID");
    assert.match(error.params[2] ?? "", /volume\.virtual_size: 9007199254740993 cannot be represented exactly/);
  });

  test("stdin holds exactly one line of compact JSON and --json is the only argument", async (t) => {
    const dir = await pluginDir(t, {
      "Volume.set": `printf '%s\\n' "$#" "$@" > "$(dirname "$0")/args"\ncat > "$(dirname "$0")/stdin"\necho null`,
    });
    const client = createPluginClient("shfix", createExecTransport(dir, "shfix"));
    const params = { dbg: "t", sr: "file:///srv/sr1", key: "v1", k: "snapshot_time", v: "20240101T00:00:00Z\n\"quoted\" ünïcode" };
    assert.equal(await client.call("Volume.set", params), null);
    const stdin = await readFile(join(dir, "stdin"), "utf8");
    assert.equal(stdin, `${encodeParams("Volume.set", params)}\n`);
    assert.equal(stdin.split("\n").length, 2, "one line, then the newline that ends it");
    assert.deepEqual(JSON.parse(stdin), params);
    assert.equal(await readFile(join(dir, "args"), "utf8"), "1\n--json\n");
  });

  test("the environment is inherited", async (t) => {
    const dir = await pluginDir(t, { "Plugin.diagnostics": 'cat > /dev/null\nprintf \'"%s"\\n\' "$HANGAR_EXEC_TEST"' });
    process.env.HANGAR_EXEC_TEST = "inherited-value";
    t.after(() => delete process.env.HANGAR_EXEC_TEST);
    assert.equal(await createExecTransport(dir, "shfix").invoke("Plugin.diagnostics", '{"dbg":"t"}'), "inherited-value");
  });

  test("a script that never reads stdin is fine", async (t) => {
    const dir = await pluginDir(t, { "Plugin.diagnostics": 'echo \'"did not read"\'' });
    const bigParams = JSON.stringify({ dbg: "x".repeat(4 * 1024 * 1024) });
    assert.equal(await createExecTransport(dir, "shfix").invoke("Plugin.diagnostics", bigParams), "did not read");
  });

  test("a 50 MB result is read whole and parsed", async (t) => {
    const dir = await pluginDir(t, {
      "Plugin.diagnostics": "cat > /dev/null\nprintf '\"'\nhead -c 50000000 /dev/zero | tr '\\000' x\nprintf 'END\"\\n'",
    });
    const client = createPluginClient("shfix", createExecTransport(dir, "shfix"));
    const result = await client.call("Plugin.diagnostics", { dbg: "t" });
    assert.equal(result.length, 50_000_003);
    assert.ok(result.startsWith("xxxx") && result.endsWith("xEND"));
  });
});

describe("errors the plugin reports", () => {
  test("an error object becomes a StorageError with code, params, constructor and detail", async (t) => {
    const dir = await pluginDir(t, {
      "Volume.stat": fails('{"code":"SR_BACKEND_FAILURE","params":["Volume_does_not_exist","v1"],"backtrace":{"error":"no v1","files":[],"lines":[]}}'),
    });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("Volume.stat", '{"dbg":"t","sr":"s","key":"v1"}'));
    assert.equal(error.code, "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params, ["Volume_does_not_exist", "v1"]);
    assert.equal(error.errorConstructor, "Volume_does_not_exist");
    assert.deepEqual(error.detail, ["v1"]);
  });

  test("Activated_on_another_host carries the host uuid; any non-zero exit code will do", async (t) => {
    const dir = await pluginDir(t, {
      "Volume.snapshot": fails('{"code":"SR_BACKEND_FAILURE","params":["Activated_on_another_host","6e4b1a2c-host"]}', 7),
    });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("Volume.snapshot", "{}"));
    assert.equal(error.errorConstructor, "Activated_on_another_host");
    assert.deepEqual(error.detail, ["6e4b1a2c-host"]);
  });

  test("a free-form SR_BACKEND_FAILURE_<n> code keeps its params", async (t) => {
    const dir = await pluginDir(t, {
      "SR.attach": fails('{"code":"SR_BACKEND_FAILURE_42","params":["Cannot open /dev/sdz","errno 2"],"backtrace":{"error":"","files":[],"lines":[]}}'),
    });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.attach", "{}"));
    assert.equal(error.code, "SR_BACKEND_FAILURE_42");
    assert.deepEqual(error.params, ["Cannot open /dev/sdz", "errno 2"]);
    assert.equal(error.errorConstructor, undefined);
    assert.deepEqual(error.detail, ["Cannot open /dev/sdz", "errno 2"]);
  });
});

describe("SCRIPT_FAILED", () => {
  test("bad JSON names the plugin and method and carries the stderr tail", async (t) => {
    const dir = await pluginDir(t, { "SR.ls": "cat > /dev/null\necho 'Traceback: it broke' >&2\necho 'this is not json'" });
    const error = await rejection(createExecTransport(dir, "org.example.shfix").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.deepEqual(error.params.slice(0, 2), ["org.example.shfix", "SR.ls"]);
    assert.match(error.params[2] ?? "", /bad JSON on stdout.*this is not json/);
    assert.equal(error.params[3], "Traceback: it broke");
    assert.match(error.message, /org\.example\.shfix SR\.ls: .*bad JSON.*stderr: Traceback: it broke/s);
  });

  test("only the tail of a long stderr is kept", async (t) => {
    const dir = await pluginDir(t, { "SR.ls": "cat > /dev/null\nhead -c 100000 /dev/zero | tr '\\000' e >&2\necho ' TAIL-MARKER' >&2\necho '{'" });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.ls", "{}"));
    const tail = error.params[3] ?? "";
    assert.ok(tail.length <= 4096, `stderr tail is ${tail.length} bytes`);
    assert.ok(tail.endsWith("TAIL-MARKER"));
  });

  test("empty output, with exit 0 or not, is a failure", async (t) => {
    const dir = await pluginDir(t, { "SR.detach": "cat > /dev/null", "SR.destroy": "cat > /dev/null\nexit 3" });
    const transport = createExecTransport(dir, "shfix");
    const silent = await rejection(transport.invoke("SR.detach", "{}"));
    assert.equal(silent.code, "SCRIPT_FAILED");
    assert.match(silent.message, /empty output/);
    const exit3 = await rejection(transport.invoke("SR.destroy", "{}"));
    assert.equal(exit3.code, "SCRIPT_FAILED");
    assert.match(exit3.message, /exit code 3/);
  });

  test("a non-zero exit whose stdout is JSON but not an error object", async (t) => {
    const dir = await pluginDir(t, { "SR.ls": fails('"oops"', 2) });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.match(error.message, /exit code 2; stdout is not an error object: "oops"/);
  });

  test("a script killed by a signal", async (t) => {
    const dir = await pluginDir(t, { "SR.ls": "cat > /dev/null\necho '[]'\nkill -KILL $$" });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.match(error.message, /killed by signal SIGKILL/);
  });

  test("a script whose interpreter does not exist", async (t) => {
    const dir = await pluginDir(t, {});
    await writeFile(join(dir, "Plugin.Query"), "#!/nonexistent/python9\nprint(None)\n", { mode: 0o755 });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("Plugin.query", "{}"));
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.deepEqual(error.params.slice(0, 2), ["shfix", "Plugin.query"]);
    assert.match(error.message, /cannot start/);
  });

  test("output beyond the limit is refused", async (t) => {
    const dir = await pluginDir(t, { "Plugin.diagnostics": "cat > /dev/null\nprintf '\"'\nhead -c 100000 /dev/zero | tr '\\000' x\nprintf '\"'" });
    const error = await rejection(createExecTransport(dir, "shfix", { maxOutputBytes: 1000 }).invoke("Plugin.diagnostics", "{}"));
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.match(error.message, /more output than the limit/);
  });

  test("a timeout kills the script's whole process group", async (t) => {
    const dir = await pluginDir(t, {
      "SR.ls": 'cat > /dev/null\necho $$ > "$(dirname "$0")/script.pid"\nsleep 30 &\necho $! > "$(dirname "$0")/child.pid"\nwait',
    });
    const started = Date.now();
    const error = await rejection(createExecTransport(dir, "shfix", { timeoutMs: 400 }).invoke("SR.ls", "{}"));
    assert.ok(Date.now() - started < 5000, "the call returned promptly");
    assert.equal(error.code, "SCRIPT_FAILED");
    assert.match(error.message, /timed out after 0\.4 s; its process group was killed/);
    const scriptPid = Number(await readFile(join(dir, "script.pid"), "utf8"));
    const childPid = Number(await readFile(join(dir, "child.pid"), "utf8"));
    t.after(() => {
      try {
        process.kill(childPid, "SIGKILL");
      } catch {
        // gone, as it should be
      }
    });
    assert.ok(await waitUntilGone(scriptPid, 2000), "the script is gone");
    assert.ok(await waitUntilGone(childPid, 2000), "its background sleep is gone too");
  });
});

describe("finding the script", () => {
  test("a missing script is SCRIPT_MISSING", async (t) => {
    const dir = await pluginDir(t, { "Plugin.Query": prints("{}") });
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_MISSING");
    assert.deepEqual(error.params, [join(dir, "SR.ls")]);
    assert.match(error.message, /shfix does not implement SR\.ls/);
  });

  test("a missing plugin directory is SCRIPT_MISSING", async () => {
    const error = await rejection(createExecTransport("/nonexistent/hangar/plugin", "ghost").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_MISSING");
  });

  test("a dangling symlink or a directory is not a script", async (t) => {
    const dir = await pluginDir(t, {});
    await symlink(join(dir, "gone.py"), join(dir, "SR.ls"));
    await mkdir(join(dir, "SR.stat"));
    const transport = createExecTransport(dir, "shfix");
    assert.equal((await rejection(transport.invoke("SR.ls", "{}"))).code, "SCRIPT_MISSING");
    assert.equal((await rejection(transport.invoke("SR.stat", "{}"))).code, "SCRIPT_MISSING");
  });

  test("a script without the execute bit is SCRIPT_NOT_EXECUTABLE", async (t) => {
    const dir = await pluginDir(t, { "SR.ls": prints("[]") });
    await chmod(join(dir, "SR.ls"), 0o644);
    const error = await rejection(createExecTransport(dir, "shfix").invoke("SR.ls", "{}"));
    assert.equal(error.code, "SCRIPT_NOT_EXECUTABLE");
    assert.deepEqual(error.params, [join(dir, "SR.ls")]);
  });

  test("lookup is case-insensitive: plugin.QUERY serves Plugin.query", async (t) => {
    const dir = await pluginDir(t, { "plugin.QUERY": prints(JSON.stringify(QUERY)) });
    assert.equal(await findScript(dir, "Plugin.query", "shfix"), join(dir, "plugin.QUERY"));
    assert.deepEqual(await createPluginClient("shfix", createExecTransport(dir, "shfix")).call("Plugin.query", { dbg: "t" }), QUERY);
  });

  test("the exactly cased script is preferred", async (t) => {
    const dir = await pluginDir(t, { "PLUGIN.QUERY": prints('"upper"'), "Plugin.diagnostics": prints('"exact"'), "plugin.DIAGNOSTICS": prints('"other"') });
    assert.equal(await createExecTransport(dir, "shfix").invoke("Plugin.diagnostics", "{}"), "exact");
    assert.equal(await findScript(dir, "Plugin.diagnostics", "shfix"), join(dir, "Plugin.diagnostics"));
  });

  test("symlinks to one dispatcher are followed", async (t) => {
    const dir = await pluginDir(t, { "dispatch.sh": 'cat > /dev/null\nprintf \'"%s"\\n\' "$(basename "$0")"' });
    await symlink("dispatch.sh", join(dir, "Plugin.diagnostics"));
    assert.equal(await createExecTransport(dir, "shfix").invoke("Plugin.diagnostics", "{}"), "Plugin.diagnostics");
  });
});

describe("results checked by the client", () => {
  test("a malformed result is PLUGIN_RESULT_INVALID naming plugin, method and field", async (t) => {
    const dir = await pluginDir(t, {
      "SR.stat": prints('{"sr":"s","name":"n","description":"","free_space":"lots","total_space":1,"datasources":[],"clustered":false,"health":["Healthy",""]}'),
    });
    const client = createPluginClient("org.example.shfix", createExecTransport(dir, "org.example.shfix"));
    const error = await rejection(client.call("SR.stat", { dbg: "t", sr: "s" }));
    assert.equal(error.code, "PLUGIN_RESULT_INVALID");
    assert.deepEqual(error.params.slice(0, 2), ["org.example.shfix", "SR.stat"]);
    assert.match(error.params[2] ?? "", /^sr_stat\.free_space: expected int64, got "lots"$/);
    assert.match(error.message, /plugin org\.example\.shfix returned an invalid result for SR\.stat: sr_stat\.free_space/);
  });

  test("an error object printed with exit 0 is not a result", async (t) => {
    const dir = await pluginDir(t, { "SR.detach": prints('{"code":"SR_BACKEND_FAILURE","params":["x"]}') });
    const error = await rejection(createPluginClient("shfix", createExecTransport(dir, "shfix")).call("SR.detach", { dbg: "t", sr: "s" }));
    assert.equal(error.code, "PLUGIN_RESULT_INVALID");
  });

  test("bad params never reach the script", async (t) => {
    const dir = await pluginDir(t, { "Volume.resize": 'touch "$(dirname "$0")/ran"\necho null' });
    const client = createPluginClient("shfix", createExecTransport(dir, "shfix"));
    const error = await rejection(client.call("Volume.resize", { dbg: "t", sr: "s", key: "k", new_size: 1.5 }));
    assert.equal(error.code, "INCORRECT_PARAMETERS");
    await assert.rejects(readFile(join(dir, "ran")), { code: "ENOENT" });
  });
});
