// pool, host, SR and PBD calls through real HTTP JSON-RPC against the bundled file plugin: the first
// start's default SR, SR.create / introduce / forget / destroy, names through the plugin, probe, scan,
// SR_NOT_ATTACHED answered by the toolstack itself, and SRs attached again after a restart.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { PluginClient } from "../../storage/client.ts";
import { defaultPluginRoot, scanPluginRoot } from "../../storage/registry.ts";
import { assertXenError, startTestToolstack, type TestToolstack, type XenApiClient } from "../storage-testing.ts";

type Rec = Record<string, unknown>;
const dbg = "toolstack SR test";
const MiB = 1024 * 1024;

const SR_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "allowed_operations",
  "current_operations",
  "VDIs",
  "PBDs",
  "virtual_allocation",
  "physical_utilisation",
  "physical_size",
  "type",
  "content_type",
  "shared",
  "other_config",
  "tags",
  "sm_config",
  "blobs",
  "local_cache_enabled",
  "introduced_by",
  "clustered",
  "is_tools_sr",
  "health",
];

describe("pool, host, SR and PBD", () => {
  let host: TestToolstack;
  let client: XenApiClient;
  let file: PluginClient;
  let hostRef: string;
  let poolRef: string;
  let defaultSr: string;

  const newSr = (name: string, sm_config: Rec = {}) =>
    client.call<string>("SR.create", hostRef, { path: join(host.dataDir, name) }, 0, name, `${name} SR`, "file", "user", false, sm_config);
  const pbdOf = async (sr: string) => (await client.call<string[]>("SR.get_PBDs", sr))[0]!;
  const srUri = async (sr: string) => `file://${(await client.call<Record<string, string>>("PBD.get_device_config", await pbdOf(sr))).path}`;

  before(async () => {
    host = await startTestToolstack();
    client = host.client;
    file = (await scanPluginRoot(defaultPluginRoot())).find("file", "volume")!.client;
    hostRef = (await client.call<string[]>("host.get_all"))[0]!;
    poolRef = (await client.call<string[]>("pool.get_all"))[0]!;
    defaultSr = await client.call<string>("pool.get_default_SR", poolRef);
  });
  after(() => host.stop());

  test("first start: the pool, this host, a default file SR under the data dir, attached, and a network", async () => {
    assert.equal(await client.call("pool.get_master", poolRef), hostRef);
    const sr = await client.call<Rec>("SR.get_record", defaultSr);
    assert.deepEqual(Object.keys(sr).sort(), [...SR_FIELDS].sort());
    assert.equal(sr.type, "file");
    assert.equal(sr.name_label, "Local storage");
    assert.equal(sr.content_type, "user");
    assert.deepEqual(sr.health, ["Healthy", ""]);
    assert.ok(Number(sr.physical_size) > 0 && Number(sr.physical_utilisation) >= 0);
    assert.ok((sr.allowed_operations as string[]).includes("vdi_create"));
    const pbd = await client.call<Rec>("PBD.get_record", await pbdOf(defaultSr));
    assert.equal(pbd.host, hostRef);
    assert.equal(pbd.SR, defaultSr);
    assert.equal(pbd.currently_attached, true);
    assert.equal((pbd.device_config as Rec).path, join(host.dataDir, "srs", "default"));
    assert.deepEqual(await client.call("host.get_PBDs", hostRef), [await pbdOf(defaultSr)]);
    assert.equal(await client.call("SR.get_by_uuid", sr.uuid), defaultSr);
    assert.deepEqual(await client.call("SR.get_by_name_label", "Local storage"), [defaultSr]);
    assert.equal(await client.call("SR.get_type", defaultSr), "file");
    assert.ok((await client.call<string[]>("SR.get_supported_types")).includes("file"));
    assert.equal((await client.call<string[]>("network.get_all")).length, 1);
    await assertXenError(client.call("SR.get_record", "OpaqueRef:nope"), "HANDLE_INVALID");
    await assertXenError(client.call("SR.get_by_uuid", "nope"), "UUID_INVALID");
  });

  test("pool: default SR and other_config", async () => {
    const other = await newSr("pool-test");
    await client.call("pool.set_default_SR", poolRef, other);
    assert.equal(await client.call("pool.get_default_SR", poolRef), other);
    await client.call("pool.set_default_SR", poolRef, defaultSr);
    await assertXenError(client.call("pool.set_default_SR", poolRef, "OpaqueRef:nope"), "HANDLE_INVALID", ["SR", "OpaqueRef:nope"]);
    await client.call("pool.add_to_other_config", poolRef, "k", " v ");
    await assertXenError(client.call("pool.add_to_other_config", poolRef, "k", "w"), "MAP_DUPLICATE_KEY");
    assert.deepEqual(await client.call("pool.get_other_config", poolRef), { k: " v " });
    await client.call("pool.remove_from_other_config", poolRef, "k");
    assert.deepEqual(await client.call("pool.get_other_config", poolRef), {});
    const records = await client.call<Record<string, Rec>>("pool.get_all_records");
    assert.deepEqual(Object.keys(records), [poolRef]);
    assert.ok("other_config" in records[poolRef]!);
  });

  test("SR.create, names kept by the plugin, other_config, and SR_UNKNOWN_DRIVER / the plugin's own errors", async () => {
    const sr = await newSr("created", { custom: "yes" });
    const record = await client.call<Rec>("SR.get_record", sr);
    assert.equal(record.name_label, "created");
    assert.deepEqual(record.sm_config, { custom: "yes" });
    assert.deepEqual(record.VDIs, []);
    await client.call("SR.set_name_label", sr, "renamed");
    await client.call("SR.set_name_description", sr, "described");
    const stat = await file.call("SR.stat", { dbg, sr: await srUri(sr) });
    assert.equal(stat.name, "renamed");
    assert.equal(stat.description, "described");
    assert.equal(stat.uuid, record.uuid, "the plugin made the SR with the toolstack's uuid");
    assert.equal(await client.call("SR.get_name_label", sr), "renamed");
    await client.call("SR.add_to_other_config", sr, "a", "b");
    assert.deepEqual(await client.call("SR.get_other_config", sr), { a: "b" });

    await assertXenError(client.call("SR.create", hostRef, {}, 0, "x", "", "nope", "user", false, {}), "SR_UNKNOWN_DRIVER");
    const noPath = await assertXenError(client.call("SR.create", hostRef, {}, 0, "x", "", "file", "user", false, {}), "SR_BACKEND_FAILURE");
    assert.match(noPath.params[0]!, /configuration needs "path"/, "the plugin's own message");
  });

  test("SR.scan finds volumes made behind the toolstack's back and announces them; virtual_allocation follows", async () => {
    const sr = await newSr("scanned");
    const token = (await client.call<{ token: string }>("event.from", ["vdi"], "", 0)).token;
    const volume = await file.call("Volume.create", { dbg, sr: await srUri(sr), name: "behind", description: "", size: 4 * MiB, sharable: false });
    await client.call("SR.scan", sr);
    const [vdi] = await client.call<string[]>("SR.get_VDIs", sr);
    assert.equal(await client.call("VDI.get_location", vdi), volume.key);
    const events = (await client.call<{ events: Rec[] }>("event.from", ["vdi"], token, 1)).events;
    assert.ok(events.some((e) => e.operation === "add" && e.ref === vdi && (e.snapshot as Rec).name_label === "behind"));
    assert.equal(await client.call("SR.get_virtual_allocation", sr), 4 * MiB);
  });

  test("SR.probe answers xapi's SRlist XML, SR.probe_ext the plugin's probe results", async () => {
    const uuid = await client.call<string>("SR.get_uuid", defaultSr);
    const xml = await client.call<string>("SR.probe", hostRef, { path: join(host.dataDir, "srs") }, "file", {});
    assert.match(xml, new RegExp(`<SRlist><SR><UUID>${uuid}</UUID><NameLabel>Local storage</NameLabel>`));
    const found = await client.call<Rec[]>("SR.probe_ext", hostRef, { path: join(host.dataDir, "srs") }, "file", {});
    const sr = found.find((r) => (r.sr as Rec | undefined)?.uuid === uuid);
    assert.ok(sr !== undefined, JSON.stringify(found));
    assert.equal(sr.complete, true);
    assert.equal((sr.sr as Rec).health, "Healthy");
    const empty = await client.call<Rec[]>("SR.probe_ext", hostRef, { path: join(host.dataDir, "not-yet") }, "file", {});
    assert.deepEqual(empty, [{ configuration: { path: join(host.dataDir, "not-yet") }, complete: true, extra_info: { creatable: "true" } }]);
    assert.equal(await client.call("SR.probe", hostRef, { path: join(host.dataDir, "not-yet") }, "file", {}), '<?xml version="1.0" ?><SRlist></SRlist>');
  });

  test("a detached SR: SR_NOT_ATTACHED from the toolstack itself, its record still listed; PBD.plug attaches it again", async () => {
    const sr = await newSr("detached");
    const vdi = await client.call<string>("VDI.create", { SR: sr, virtual_size: MiB });
    const pbd = await pbdOf(sr);
    await assertXenError(client.call("PBD.destroy", pbd), "OPERATION_NOT_ALLOWED");
    await client.call("PBD.unplug", pbd);
    assert.equal(await client.call("PBD.get_currently_attached", pbd), false);
    await assertXenError(client.call("VDI.create", { SR: sr, virtual_size: MiB }), "SR_NOT_ATTACHED", [sr]);
    await assertXenError(client.call("SR.scan", sr), "SR_NOT_ATTACHED", [sr]);
    await assertXenError(client.call("VDI.get_record", vdi), "SR_NOT_ATTACHED", [sr]);
    assert.equal((await client.call<string[]>("SR.get_health", sr))[0], "Unreachable");
    assert.deepEqual(await client.call("SR.get_VDIs", sr), [vdi]);
    assert.ok(!(await client.call<string[]>("VDI.get_all")).includes(vdi));
    await client.call("PBD.plug", pbd);
    assert.equal((await client.call<Rec>("VDI.get_record", vdi)).SR, sr);
  });

  test("SR.forget, then SR.introduce, PBD.create and PBD.plug bring the SR back with the same VDI refs", async () => {
    const sr = await newSr("forgotten");
    const vdi = await client.call<string>("VDI.create", { SR: sr, virtual_size: MiB, name_label: "kept" });
    const { uuid, name_label } = await client.call<Rec>("SR.get_record", sr);
    const pbd = await pbdOf(sr);
    const deviceConfig = await client.call<Rec>("PBD.get_device_config", pbd);
    await assertXenError(client.call("SR.forget", sr), "SR_HAS_PBD", [sr]);
    await client.call("PBD.unplug", pbd);
    await client.call("SR.forget", sr);
    await assertXenError(client.call("SR.get_record", sr), "HANDLE_INVALID");
    await assertXenError(client.call("PBD.get_record", pbd), "HANDLE_INVALID");
    await assertXenError(client.call("VDI.get_record", vdi), "HANDLE_INVALID");
    assert.ok(!(await client.call<string[]>("host.get_PBDs", hostRef)).includes(pbd));

    const again = await client.call<string>("SR.introduce", uuid, name_label, "", "file", "user", false, {});
    const newPbd = await client.call<string>("PBD.create", { host: hostRef, SR: again, device_config: deviceConfig });
    await assertXenError(client.call("PBD.create", { host: hostRef, SR: again, device_config: deviceConfig }), "PBD_EXISTS");
    await client.call("PBD.plug", newPbd);
    await client.call("SR.scan", again);
    assert.deepEqual(await client.call("SR.get_VDIs", again), [vdi], "refs derive from the SR uuid and the volume key");
    assert.equal(await client.call("VDI.get_name_label", vdi), "kept");
  });

  test("SR.destroy: refused while a VBD uses a VDI; then the plugin destroys it and every record goes", async () => {
    const sr = await newSr("destroyed");
    const vdi = await client.call<string>("VDI.create", { SR: sr, virtual_size: MiB });
    const vm = await client.call<string>("VM.create", { name_label: "user" });
    const vbd = await client.call<string>("VBD.create", { VM: vm, VDI: vdi, type: "Disk", mode: "RW" });
    await assertXenError(client.call("SR.destroy", sr), "VDI_IN_USE");
    await client.call("VBD.destroy", vbd);
    const uri = await srUri(sr);
    const pbd = await pbdOf(sr);
    await client.call("pool.set_default_SR", poolRef, sr);
    await client.call("SR.destroy", sr);
    await assertXenError(client.call("SR.get_record", sr), "HANDLE_INVALID");
    await assertXenError(client.call("PBD.get_record", pbd), "HANDLE_INVALID");
    await assertXenError(client.call("VDI.get_record", vdi), "HANDLE_INVALID");
    assert.equal(await client.call("pool.get_default_SR", poolRef), "OpaqueRef:NULL");
    await assertXenError(client.call("VDI.create", { SR: "OpaqueRef:NULL", virtual_size: MiB }), "DEFAULT_SR_NOT_FOUND");
    await assert.rejects(file.call("SR.stat", { dbg, sr: uri }), "the plugin destroyed the SR");
    await client.call("pool.set_default_SR", poolRef, defaultSr);
  });

  test("SR records reuse SR.stat answers for a moment", async () => {
    const started = Date.now();
    await client.call("SR.get_all_records");
    const first = Date.now() - started;
    const again = Date.now();
    const records = await client.call<Record<string, Rec>>("SR.get_all_records");
    assert.ok(Object.keys(records).length >= 6);
    assert.ok(Date.now() - again < Math.max(100, first / 2), `the second listing (${Date.now() - again} ms) reuses the stats of the first (${first} ms)`);
  });

  test("a restart attaches the SRs again (SR.attach after a reboot lost the attachment) with the same refs", async () => {
    const vdi = await client.call<string>("VDI.create", { SR: defaultSr, virtual_size: MiB, name_label: "survivor" });
    const uri = await srUri(defaultSr);
    await host.restart(async () => {
      await file.call("SR.detach", { dbg, sr: uri }); // as a reboot leaves it
    });
    client = host.client;
    assert.equal(await client.call("VDI.get_name_label", vdi), "survivor");
    assert.equal((await file.call("SR.stat", { dbg, sr: uri })).name, "Local storage", "attached again");
    assert.equal(await client.call("pool.get_default_SR", poolRef), defaultSr);
    assert.equal((await client.call<string[]>("network.get_all")).length, 1, "the default network is made once");
    assert.equal((await client.call<string[]>("SR.get_by_name_label", "Local storage")).length, 1, "the default SR is made once");
  });
});
