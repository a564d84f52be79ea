// Real XenAPI clients against `hangar serve`: Xen Orchestra's `xen-api` over JSON-RPC and over XML-RPC
// (log in, pool and listMethods, its event.from cache, a task watched to its end, SR and VDI calls), and
// Python's standard-library xmlrpc.client.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { rm } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { createClient, type Xapi, type XapiError } from "xen-api";
import { ROOT_PASSWORD, type ServeProcess, startServeProcess, tempDataDir } from "./testing.ts";

const GiB = 1024 ** 3;

let service: ServeProcess;

before(async () => {
  service = await startServeProcess(await tempDataDir());
});

after(async () => {
  await service.stop();
  await rm(service.dataDir, { recursive: true, force: true });
});

const isXapiError = (code: string) => (error: unknown) => (error as XapiError).code === code;

/** Waits until `check` holds (the client's cache follows events with a delay). */
async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !check(); waited += 50) {
    if (waited > 10_000) throw new Error(`not within 10 s: ${what}`);
    await sleep(50);
  }
}

for (const transport of ["json-rpc", "xml-rpc"] as const) {
  describe(`xen-api over ${transport}`, () => {
    let xapi: Xapi;

    before(async () => {
      xapi = createClient({ url: service.url.replace(/\/$/, ""), auth: { user: "root", password: ROOT_PASSWORD }, transport });
      await xapi.connect();
      await xapi.objectsFetched;
    });

    after(() => xapi.disconnect());

    test("logs in, reads the pool (pool.get_all_records) and the calls (system.listMethods)", async () => {
      assert.match(xapi.sessionId, /^OpaqueRef:/);
      assert.match(xapi.pool.$ref, /^OpaqueRef:/);
      assert.equal(xapi.pool.$type, "pool");
      const pools = await xapi.getAllRecords("pool");
      assert.deepEqual(
        pools.map((p) => p.$ref),
        [xapi.pool.$ref],
      );
      const methods = await xapi.call<string[]>("system.listMethods");
      for (const name of ["session.login_with_password", "pool.get_all_records", "SR.get_all_records", "VDI.snapshot", "Async.VDI.snapshot", "event.from"]) {
        assert.ok(methods.includes(name), name);
      }
      const master = xapi.getObjectByRef(String(xapi.pool.master));
      assert.equal(master?.$type, "host", "the host came into the cache through its event.from loop");
    });

    test("a task made with task.create is watched through event.from until another call ends it", async () => {
      const task = await xapi.call<string>("task.create", `watched over ${transport}`, "");
      const watched = xapi.watchTask(task);
      await eventually(() => xapi.getObjectByRef(task, null) !== null, "the task in the cache");
      await xapi.call("task.set_progress", task, 0.5);
      await eventually(() => xapi.getObjectByRef(task)?.progress === 0.5, "progress 0.5 in the cache");
      await xapi.call("task.set_status", task, "success");
      assert.equal(await watched, "");

      const cancelled = await xapi.call<string>("task.create", "cancelled", "");
      const watchedCancel = xapi.watchTask(cancelled);
      await xapi.call("task.cancel", cancelled);
      await assert.rejects(watchedCancel, /task canceled/);
    });

    test("SR.get_all_records; VDI.create, Async.VDI.snapshot and VDI.destroy; a failing Async call rejects with its code", async () => {
      const srs = await xapi.getAllRecords("SR");
      const local = srs.find((sr) => sr.name_label === "Local storage");
      assert.ok(local, JSON.stringify(srs.map((sr) => sr.name_label)));
      assert.equal(local.type, "file");
      assert.ok(Number(local.physical_size) > 0);

      const name = `disk over ${transport} & <co> é 💾`;
      const vdi = await xapi.call<string>("VDI.create", {
        SR: local.$ref,
        virtual_size: GiB,
        name_label: name,
        name_description: "",
        type: "user",
        sharable: false,
        read_only: false,
        other_config: { made_by: transport },
      });
      const record = await xapi.getRecord("VDI", vdi);
      assert.equal(record.name_label, name);
      assert.equal(Number(record.virtual_size), GiB);
      assert.deepEqual(record.other_config, { made_by: transport });
      await eventually(() => xapi.getObjectByRef(vdi, null) !== null, "the new VDI in the cache (a VDI event)");

      const snapshot = await xapi.callAsync<string>("VDI.snapshot", vdi, {});
      assert.match(snapshot, /^OpaqueRef:/);
      assert.equal((await xapi.getRecord("VDI", snapshot)).is_a_snapshot, true);
      assert.equal(await xapi.call("VDI.get_snapshot_of", snapshot), vdi);

      const vm = await xapi.call<string>("VM.create", { name_label: `vm over ${transport}` });
      const vbd = await xapi.call<string>("VBD.create", { VM: vm, VDI: vdi, type: "Disk", mode: "RW", userdevice: "0" });
      await assert.rejects(xapi.callAsync("VDI.destroy", vdi), isXapiError("VDI_IN_USE"));
      await xapi.call("VBD.destroy", vbd);
      await xapi.callAsync("VDI.destroy", snapshot);
      await xapi.call("VDI.destroy", vdi);
      await assert.rejects(xapi.getRecord("VDI", vdi), isXapiError("HANDLE_INVALID"));
      await eventually(() => xapi.getObjectByRef(vdi, null) === null, "the VDI gone from the cache");
    });

    test("errors reach the client as XenAPI errors with their params", async () => {
      await assert.rejects(xapi.call("VDI.get_record", "OpaqueRef:nothing"), (error: XapiError) => error.code === "HANDLE_INVALID" && error.params[1] === "OpaqueRef:nothing");
      await assert.rejects(xapi.call("VDI.no_such_call", "OpaqueRef:x"), isXapiError("MESSAGE_METHOD_UNKNOWN"));
    });
  });
}

describe("Python's xmlrpc.client", () => {
  test("logs in over XML-RPC (2 and 4 parameters), lists SRs and VDIs, makes a VDI, reads events", () => {
    const script = String.raw`
import json, sys, xmlrpc.client
proxy = xmlrpc.client.ServerProxy(sys.argv[1])
def value(reply):
    if reply["Status"] != "Success":
        raise SystemExit("failure: " + json.dumps(reply["ErrorDescription"]))
    return reply["Value"]
session = value(proxy.session.login_with_password("root", sys.argv[2], "2.21", "python"))
value(proxy.session.logout(value(proxy.session.login_with_password("root", sys.argv[2]))))
srs = value(proxy.SR.get_all_records(session))
local = [ref for ref, sr in srs.items() if sr["name_label"] == "Local storage"][0]
made = value(proxy.VDI.create(session, {"SR": local, "virtual_size": 1048576, "name_label": "from python & <xml>", "type": "user", "sharable": False, "read_only": False, "other_config": {}}))
vdis = value(proxy.VDI.get_all_records(session))
snapshot = value(getattr(proxy.event, "from")(session, ["vdi"], "", 0.0))
wrong = proxy.session.login_with_password("root", "wrong")
value(proxy.session.logout(session))
print(json.dumps({
    "srs": {ref: {"name_label": sr["name_label"], "type": sr["type"], "physical_size": sr["physical_size"]} for ref, sr in srs.items()},
    "made": made,
    "vdis": {ref: {"name_label": vdi["name_label"], "virtual_size": vdi["virtual_size"], "SR": vdi["SR"]} for ref, vdi in vdis.items()},
    "event_classes": sorted({event["class"] for event in snapshot["events"]}),
    "wrong": wrong,
}))
`;
    const run = spawnSync("python3", ["-c", script, service.url, ROOT_PASSWORD], { encoding: "utf8", timeout: 60_000 });
    assert.equal(run.status, 0, run.stderr);
    const out = JSON.parse(run.stdout) as {
      srs: Record<string, { name_label: string; type: string; physical_size: string }>;
      made: string;
      vdis: Record<string, { name_label: string; virtual_size: string; SR: string }>;
      event_classes: string[];
      wrong: { Status: string; ErrorDescription: string[] };
    };
    const local = Object.entries(out.srs).find(([, sr]) => sr.name_label === "Local storage");
    assert.ok(local);
    assert.equal(local[1].type, "file");
    assert.match(local[1].physical_size, /^\d+$/, "int64 arrives as a string, as xapi sends it");
    assert.deepEqual(out.vdis[out.made], { name_label: "from python & <xml>", virtual_size: "1048576", SR: local[0] });
    assert.deepEqual(out.event_classes, ["vdi"]);
    assert.deepEqual(out.wrong, { Status: "Failure", ErrorDescription: ["SESSION_AUTHENTICATION_FAILED", "root", "Authentication failure"] });
  });
});
