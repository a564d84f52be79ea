// VDI calls through real HTTP JSON-RPC against the bundled file plugin: records built from the volumes,
// fields kept on the volumes byte-exact, snapshot / clone / resize / destroy / CBT through the plugin,
// events for every change, keys a client gives checked against SR.ls, volumes changed behind the
// toolstack's back, and ids that survive a restart.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { openVolumeData } from "../../plugins/filesr/index.ts";
import type { PluginClient } from "../../storage/client.ts";
import { defaultPluginRoot, scanPluginRoot } from "../../storage/registry.ts";
import { assertXenError, holdsFileOf, MiB, PiB, startTestToolstack, type TestToolstack, type XenApiClient } from "../storage-testing.ts";
import { vdiRef, vdiUuid } from "../../xenapi/vdi-identity.ts";
import { XEN_DATE } from "../../xenapi/values.ts";

type Rec = Record<string, unknown>;
const dbg = "toolstack VDI test";

const VDI_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "allowed_operations",
  "current_operations",
  "SR",
  "VBDs",
  "crash_dumps",
  "virtual_size",
  "physical_utilisation",
  "type",
  "sharable",
  "read_only",
  "other_config",
  "storage_lock",
  "location",
  "managed",
  "missing",
  "parent",
  "xenstore_data",
  "sm_config",
  "is_a_snapshot",
  "snapshot_of",
  "snapshots",
  "snapshot_time",
  "tags",
  "allow_caching",
  "on_boot",
  "metadata_of_pool",
  "metadata_latest",
  "is_tools_iso",
  "cbt_enabled",
];

/** Values a sloppy store would trim, fold or mangle. */
const AWKWARD = { " spaced ": " value\twith tab ", "ünï": "çødé ✓", empty: "", quote: '"{json}"\n' };

describe("VDI", () => {
  let host: TestToolstack;
  let client: XenApiClient;
  let file: PluginClient;
  let sr: string;
  let srUri: string;

  const create = (fields: Rec = {}) => client.call<string>("VDI.create", { SR: sr, virtual_size: 4 * MiB, ...fields });
  const record = (vdi: string) => client.call<Rec>("VDI.get_record", vdi);
  const volumeOf = async (vdi: string) => file.call("Volume.stat", { dbg, sr: srUri, key: await client.call<string>("VDI.get_location", vdi) });

  /** Events of the VDI class after `token`, waiting up to a second for the first. */
  async function vdiEvents(token: string): Promise<Rec[]> {
    return (await client.call<{ events: Rec[] }>("event.from", ["vdi"], token, 1)).events;
  }
  const currentToken = async () => (await client.call<{ token: string }>("event.from", ["vdi"], "", 0)).token;

  before(async () => {
    host = await startTestToolstack();
    client = host.client;
    file = (await scanPluginRoot(defaultPluginRoot())).find("file", "volume")!.client;
    sr = await client.call<string>("pool.get_default_SR", (await client.call<string[]>("pool.get_all"))[0]);
    const [pbd] = await client.call<string[]>("SR.get_PBDs", sr);
    srUri = `file://${(await client.call<Record<string, string>>("PBD.get_device_config", pbd)).path}`;
  });
  after(() => host.stop());

  test("VDI.create takes xapi's record argument; the record is the volume's, extra fields kept on it byte-exact", async () => {
    const token = await currentToken();
    const vdi = await create({ name_label: "disk", name_description: "a disk", virtual_size: 10 * MiB + 1, type: "system", sharable: true, other_config: AWKWARD, sm_config: { s: "m" } });
    const vdiRecord = await record(vdi);
    assert.deepEqual(Object.keys(vdiRecord).sort(), [...VDI_FIELDS].sort());
    const volume = await volumeOf(vdi);
    assert.equal(vdiRecord.uuid, volume.uuid, "the plugin's uuid");
    assert.equal(vdiRecord.location, volume.key);
    assert.equal(vdiRecord.SR, sr);
    assert.equal(vdiRecord.name_label, "disk");
    assert.equal(vdiRecord.name_description, "a disk");
    assert.ok(Number(vdiRecord.virtual_size) >= 10 * MiB + 1);
    assert.equal(vdiRecord.type, "system");
    assert.equal(vdiRecord.sharable, true);
    assert.equal(vdiRecord.read_only, false);
    assert.deepEqual(vdiRecord.other_config, AWKWARD);
    assert.deepEqual(vdiRecord.sm_config, { s: "m" });
    assert.equal(volume.keys["_other_config_ spaced "], " value\twith tab ");
    assert.equal(volume.keys["vdi-type"], "system");
    assert.deepEqual([vdiRecord.managed, vdiRecord.missing, vdiRecord.is_a_snapshot, vdiRecord.VBDs], [true, false, false, []]);

    assert.equal(await client.call("VDI.get_by_uuid", vdiRecord.uuid), vdi);
    assert.deepEqual(await client.call("VDI.get_by_name_label", "disk"), [vdi]);
    assert.ok((await client.call<string[]>("VDI.get_all")).includes(vdi));
    assert.deepEqual((await client.call<Record<string, Rec>>("VDI.get_all_records"))[vdi], vdiRecord);
    assert.equal(await client.call("VDI.get_virtual_size", vdi), vdiRecord.virtual_size);
    assert.ok((await vdiEvents(token)).some((e) => e.operation === "add" && e.ref === vdi && e.class === "vdi"));

    await assertXenError(create({ type: "bogus" }), "VALUE_NOT_SUPPORTED");
    await assertXenError(client.call("VDI.create", { SR: sr }), "FIELD_TYPE_ERROR", ["virtual_size"]);
    await assertXenError(create({ SR: "OpaqueRef:nope" }), "HANDLE_INVALID", ["SR", "OpaqueRef:nope"]);
    await assertXenError(client.call("VDI.get_record", "OpaqueRef:nope"), "HANDLE_INVALID", ["VDI", "OpaqueRef:nope"]);
    await assertXenError(client.call("VDI.get_by_uuid", "nope"), "UUID_INVALID");
  });

  test("a size the SR's filesystem refuses: SR_BACKEND_FAILURE saying the size in words, and no volume, layer file or VDI left", async (t) => {
    const path = srUri.slice("file://".length);
    if (holdsFileOf(dirname(path), PiB)) return t.skip("this filesystem holds a file of 1 PiB: nothing to refuse");
    const layers = () => readdirSync(join(path, "layers")).sort();
    const volumeKeys = async () => (await file.call("SR.ls", { dbg, sr: srUri })).map((v) => v.key).sort();
    const before = { layers: layers(), volumes: await volumeKeys(), vdis: await client.call<string[]>("VDI.get_all") };
    const error = await assertXenError(create({ virtual_size: PiB }), "SR_BACKEND_FAILURE");
    assert.match(error.params.join(" "), /1 PiB/);
    assert.doesNotMatch(error.params[0]!, /^E[A-Z]+\b/, "words, not a bare errno");
    assert.deepEqual(layers(), before.layers, "no layer file left");
    assert.deepEqual(await volumeKeys(), before.volumes, "no volume left");
    assert.deepEqual(await client.call("VDI.get_all"), before.vdis, "no VDI left");

    const vdi = await create({ virtual_size: 4 * MiB });
    const resized = await assertXenError(client.call("VDI.resize", vdi, PiB), "SR_BACKEND_FAILURE");
    assert.match(resized.params.join(" "), /1 PiB/);
    assert.equal(await client.call("VDI.get_virtual_size", vdi), 4 * MiB);
  });

  test("names and other_config go to the volume (Volume.set_name, Volume.set / unset), each change an event", async () => {
    const vdi = await create({ other_config: { a: "1" } });
    const token = await currentToken();
    await client.call("VDI.set_name_label", vdi, "  new name ");
    await client.call("VDI.set_name_description", vdi, "new description");
    const volume = await volumeOf(vdi);
    assert.deepEqual([volume.name, volume.description], ["  new name ", "new description"]);
    await client.call("VDI.add_to_other_config", vdi, "b", " 2 ");
    await assertXenError(client.call("VDI.add_to_other_config", vdi, "b", "3"), "MAP_DUPLICATE_KEY", ["VDI", "other_config", vdi, "b"]);
    await client.call("VDI.remove_from_other_config", vdi, "a");
    assert.deepEqual(await client.call("VDI.get_other_config", vdi), { b: " 2 " });
    await client.call("VDI.set_other_config", vdi, AWKWARD);
    assert.deepEqual(await client.call("VDI.get_other_config", vdi), AWKWARD);
    const events = (await vdiEvents(token)).filter((e) => e.ref === vdi && e.operation === "mod");
    assert.ok(events.length >= 5, `an event per change: ${events.length}`);
    assert.deepEqual((events.at(-1)!.snapshot as Rec).other_config, AWKWARD);
    assert.equal((events[0]!.snapshot as Rec).name_label, "  new name ");
  });

  test("snapshot and clone: the plugin's volumes, with the original's type and maps; snapshots linked both ways", async () => {
    const vdi = await create({ type: "user", other_config: { keep: "me" }, name_label: "origin" });
    const snapshot = await client.call<string>("VDI.snapshot", vdi, {});
    const snap = await record(snapshot);
    assert.equal(snap.is_a_snapshot, true);
    assert.equal(snap.snapshot_of, vdi);
    assert.equal(snap.read_only, true);
    assert.match(String(snap.snapshot_time), XEN_DATE);
    assert.ok(Date.now() - Date.parse(String(snap.snapshot_time).replace(/^(\d{4})(\d{2})(\d{2})/, "$1-$2-$3")) < 60_000);
    assert.deepEqual(snap.other_config, { keep: "me" });
    assert.equal(snap.name_label, "origin");
    assert.deepEqual(await client.call("VDI.get_snapshots", vdi), [snapshot]);

    const clone = await client.call<string>("VDI.clone", vdi); // driver_params may be left out
    const cloned = await record(clone);
    assert.deepEqual([cloned.is_a_snapshot, cloned.read_only, cloned.snapshot_of], [false, false, "OpaqueRef:NULL"]);
    assert.deepEqual(cloned.other_config, { keep: "me" });
    assert.notEqual(cloned.location, (await record(vdi)).location);
  });

  test("resize through the plugin; its refusal to shrink reaches the client as the plugin's error", async () => {
    const vdi = await create({ virtual_size: 4 * MiB });
    await client.call("VDI.resize", vdi, 8 * MiB);
    assert.equal(await client.call("VDI.get_virtual_size", vdi), 8 * MiB);
    const error = await assertXenError(client.call("VDI.resize", vdi, MiB), "SR_BACKEND_FAILURE");
    assert.match(error.params.join(" "), /shrink/);
  });

  test("destroy: VDI_IN_USE while a VBD links it; then the volume is gone and a del event says so", async () => {
    const vdi = await create();
    const vm = await client.call<string>("VM.create", { name_label: "holder" });
    const vbd = await client.call<string>("VBD.create", { VM: vm, VDI: vdi, type: "Disk", mode: "RW" });
    assert.deepEqual(await client.call("VDI.get_VBDs", vdi), [vbd]);
    assert.ok(!(await client.call<string[]>("VDI.get_allowed_operations", vdi)).includes("destroy"));
    await assertXenError(client.call("VDI.destroy", vdi), "VDI_IN_USE", [vdi, "destroy"]);
    await client.call("VBD.destroy", vbd);
    const token = await currentToken();
    const { location } = await record(vdi);
    await client.call("VDI.destroy", vdi);
    await assertXenError(client.call("VDI.get_record", vdi), "HANDLE_INVALID");
    assert.ok((await vdiEvents(token)).some((e) => e.ref === vdi && e.operation === "del" && (e.snapshot as Rec).location === location));
    await assert.rejects(file.call("Volume.stat", { dbg, sr: srUri, key: String(location) }), /Volume_does_not_exist/);
  });

  test("a VBD made or removed announces its VDI with the VBDs changed, without listing the SR (an SR.ls per disk at scale)", async () => {
    const vdi = await create();
    const vm = await client.call<string>("VM.create", { name_label: "holder" });
    const token = await currentToken();
    const trace = join(mkdtempSync(join(tmpdir(), "hangar-trace-")), "plugins.log");
    process.env.HANGAR_PLUGIN_TRACE = trace;
    let vbd: string;
    try {
      vbd = await client.call<string>("VBD.create", { VM: vm, VDI: vdi, type: "Disk", mode: "RW" });
      await client.call("VBD.destroy", vbd);
    } finally {
      delete process.env.HANGAR_PLUGIN_TRACE;
    }
    assert.doesNotMatch(existsSync(trace) ? readFileSync(trace, "utf8") : "", / SR\.ls /);
    const mods = (await vdiEvents(token)).filter((e) => e.ref === vdi && e.operation === "mod");
    assert.deepEqual(mods.map((e) => (e.snapshot as Rec).VBDs), [[vbd], []]);
    assert.equal((mods[0]!.snapshot as Rec).uuid, (await record(vdi)).uuid);
  });

  test("CBT: enable_cbt, list_changed_blocks between snapshots, data_destroy, disable_cbt", async () => {
    const vdi = await create({ virtual_size: 8 * MiB });
    await client.call("VDI.enable_cbt", vdi);
    assert.equal(await client.call("VDI.get_cbt_enabled", vdi), true);
    const first = await client.call<string>("VDI.snapshot", vdi, {});
    const volume = await openVolumeData(srUri.slice("file://".length), await client.call<string>("VDI.get_location", vdi), {});
    await volume.write(3 * MiB, Buffer.alloc(64 * 1024, 1));
    await volume.flush();
    await volume.close();
    const second = await client.call<string>("VDI.snapshot", vdi, {});
    const bitmap = Buffer.from(await client.call<string>("VDI.list_changed_blocks", first, second), "base64");
    const set = [...bitmap].flatMap((byte, i) => [0, 1, 2, 3, 4, 5, 6, 7].filter((bit) => byte & (0x80 >> bit)).map((bit) => i * 8 + bit));
    assert.deepEqual(set, [(3 * MiB) / (64 * 1024)], "the one 64 KiB block written");
    await client.call("VDI.data_destroy", first);
    assert.equal(await client.call("VDI.get_type", first), "cbt_metadata");
    await client.call("VDI.disable_cbt", vdi);
    assert.equal(await client.call("VDI.get_cbt_enabled", vdi), false);
  });

  test("VDI.hangar_revert: the snapshot's original gets its contents and size back, keeping its ref, uuid and maps", async () => {
    const vdi = await create({ virtual_size: 4 * MiB, name_label: "reverted", other_config: { keep: "me" } });
    const { uuid, location } = await record(vdi);
    const path = srUri.slice("file://".length);
    const write = async (byte: number) => {
      const volume = await openVolumeData(path, String(location), {});
      await volume.write(MiB, Buffer.alloc(64 * 1024, byte));
      await volume.flush();
      await volume.close();
    };
    const readByte = async () => {
      const volume = await openVolumeData(path, String(location), { readOnly: true });
      const data = Buffer.alloc(64 * 1024);
      await volume.read(MiB, data);
      await volume.close();
      return data[0];
    };
    await write(1);
    const snapshot = await client.call<string>("VDI.snapshot", vdi, {});
    await write(2);
    await client.call("VDI.resize", vdi, 8 * MiB);
    assert.equal(await readByte(), 2);
    const token = await currentToken();
    await client.call("VDI.hangar_revert", snapshot);
    assert.equal(await readByte(), 1, "the snapshot's contents");
    const after = await record(vdi);
    assert.deepEqual([after.uuid, after.location, after.virtual_size, after.other_config, after.name_label], [uuid, location, 4 * MiB, { keep: "me" }, "reverted"]);
    assert.ok((await vdiEvents(token)).some((e) => e.ref === vdi && e.operation === "mod"));

    await assertXenError(client.call("VDI.hangar_revert", vdi), "OPERATION_NOT_ALLOWED");
    await assertXenError(client.call("VDI.hangar_revert", "OpaqueRef:nope"), "HANDLE_INVALID");
    await client.call("VDI.destroy", vdi);
    await assertXenError(client.call("VDI.hangar_revert", snapshot), "OPERATION_NOT_ALLOWED");
  });

  test("VDI.introduce: only a key the SR lists is a VDI (no path reaches outside the SR)", async () => {
    const vdi = await create();
    const location = await client.call<string>("VDI.get_location", vdi);
    const introduce = (key: string) => client.call<string>("VDI.introduce", "", "", "", sr, "user", false, false, {}, key, {}, {});
    assert.equal(await introduce(location), vdi);
    for (const key of ["../../../etc/passwd", `${location}/..`, "nope", ""]) await assertXenError(introduce(key), "VDI_LOCATION_MISSING", [sr, key]);
  });

  test("volumes made and destroyed behind the toolstack's back: listed, announced, and the plugin's errors for a vanished one", async () => {
    const token = await currentToken();
    const made = await file.call("Volume.create", { dbg, sr: srUri, name: "outsider", description: "", size: MiB, sharable: false });
    const outsider = (await client.call<string[]>("VDI.get_by_name_label", "outsider"))[0]!;
    assert.equal(await client.call("VDI.get_location", outsider), made.key);
    assert.ok((await vdiEvents(token)).some((e) => e.ref === outsider && e.operation === "add"));

    await file.call("Volume.destroy", { dbg, sr: srUri, key: made.key });
    const error = await assertXenError(client.call("VDI.set_name_label", outsider, "x"), "SR_BACKEND_FAILURE");
    assert.deepEqual(error.params.slice(0, 2), ["Volume_does_not_exist", made.key], "the plugin's error, unchanged");
    await assertXenError(client.call("VDI.get_record", outsider), "HANDLE_INVALID");
    assert.ok(!(await client.call<string[]>("VDI.get_all")).includes(outsider));
  });

  test("VDI.hangar_get_records: the records named, as get_record gives them, with one SR.ls per SR they live on", async () => {
    const [hostRef] = await client.call<string[]>("host.get_all");
    const scratch = mkdtempSync(join(tmpdir(), "hangar-records-"));
    const [second, untouched] = await Promise.all(
      ["second", "untouched"].map((name) => client.call<string>("SR.create", hostRef, { path: join(scratch, name) }, 0, name, "", "file", "user", false, {})),
    );
    const here = [await create({ name_label: "here 1" }), await create({ name_label: "here 2" })];
    const there = await client.call<string>("VDI.create", { SR: second, virtual_size: MiB, name_label: "there" });
    const unasked = await client.call<string>("VDI.create", { SR: untouched, virtual_size: MiB, name_label: "not asked for" });
    const vm = await client.call<string>("VM.create", { name_label: "holder of here 1" });
    await client.call<string>("VBD.create", { VM: vm, VDI: here[0], type: "Disk", mode: "RW" });
    const trace = join(scratch, "plugins.log");
    process.env.HANGAR_PLUGIN_TRACE = trace;
    let records: Record<string, Rec>;
    try {
      records = await client.call<Record<string, Rec>>("VDI.hangar_get_records", [...here, there, here[0], "OpaqueRef:00000000-0000-4000-8000-000000000000"]);
    } finally {
      delete process.env.HANGAR_PLUGIN_TRACE;
    }
    const listings = readFileSync(trace, "utf8").split("\n").filter((line) => / SR\.ls /.test(line));
    assert.equal(listings.length, 2, "the default SR and the second, not the untouched one");
    assert.deepEqual(Object.keys(records).sort(), [...here, there].sort(), "an unknown ref is left out");
    for (const ref of [...here, there]) assert.deepEqual(records[ref], await record(ref));
    assert.equal((records[here[0]!]!.VBDs as string[]).length, 1);
    assert.deepEqual(await client.call("VDI.hangar_get_records", []), {});
    await assertXenError(client.call("VDI.hangar_get_records", ["not a ref"]), "FIELD_TYPE_ERROR");
    await client.call("VM.hangar_destroy", vm, false);
    for (const ref of [there, unasked]) await client.call("VDI.destroy", ref);
    for (const ref of [second, untouched]) await client.call("SR.destroy", ref);
    rmSync(scratch, { recursive: true, force: true });
  });

  test("refs and uuids are derived, so they survive a restart; a volume without a uuid gets a stable one", async () => {
    const before = await client.call<Record<string, Rec>>("VDI.get_all_records");
    await host.restart();
    client = host.client;
    assert.deepEqual(Object.keys(await client.call<Record<string, Rec>>("VDI.get_all_records")).sort(), Object.keys(before).sort());
    const srUuid = await client.call<string>("SR.get_uuid", sr);
    assert.equal(vdiRef(srUuid, "k1"), vdiRef(srUuid, "k1"));
    assert.notEqual(vdiRef(srUuid, "k1"), vdiRef(srUuid, "k2"));
    assert.match(vdiUuid(srUuid, { key: "k1" }), /^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(vdiUuid(srUuid, { key: "k1", uuid: "given" }), "given");
  });
});
