// Volume.*: the control plane of volumes, checked through what Volume.stat and SR.ls answer.
import { randomUUID } from "node:crypto";
import type { Blocklist, Volume } from "../../storage/types.ts";
import { type Check, check } from "../check.ts";
import type { CheckContext } from "../context.ts";
import { expect, expectEqual, expectError, show } from "../expect.ts";

/** Values a toolstack stores with Volume.set, and the bytes that break careless plugins. */
const TRICKY_KEYS: Readonly<Record<string, string>> = {
  "vdi-type": "user",
  snapshot_time: "20260102T03:04:05Z",
  is_a_snapshot: "false",
  _sm_config_host: "",
  "utf-8 ключ ✓": "é ü 日本語 🚀",
  quotes: `"double" 'single' \`back\` \\slash`,
  newlines: "line 1\nline 2\r\nline 3\n",
  json: '{"a":[1,2],"b":null}',
  padded: "  spaces around  ",
};

/** Fields of a volume that describe it rather than its momentary allocation (physical_utilisation). */
function identity(volume: Volume) {
  const { physical_utilisation: _ignored, ...rest } = volume;
  return rest;
}

function missingKey(): string {
  return `hangar-conformance-missing-${randomUUID()}`;
}

/** Fails unless a blocklist is well formed for a volume of `size` bytes: positive block size, ranges inside. */
export function expectBlocklist(blocklist: Blocklist, size: number, what: string): void {
  const { blocksize, ranges } = blocklist;
  expect(blocksize > 0, `${what}: blocksize is ${blocksize}`);
  const blocks = Math.ceil(size / blocksize);
  for (const [start, length] of ranges) {
    expect(start >= 0 && length > 0 && start + length <= blocks, `${what}: range [${start}, ${length}] is not inside the volume's ${blocks} blocks of ${blocksize} bytes`);
  }
}

async function setKeys(t: CheckContext, key: string, pairs: Readonly<Record<string, string>>): Promise<void> {
  for (const [k, v] of Object.entries(pairs)) await t.call("Volume.set", { sr: t.sr, key, k, v });
}

export const volumeChecks: Check[] = [
  check("Volume.create: at least the size asked, read-write, the name and description given, a URI", { features: ["VDI_CREATE"], needs: ["sr"] }, async (t) => {
    const size = 1024 * 1024 + 7;
    const volume = await t.createVolume({ size, name: "created «volume»", description: "for the create check", sharable: false });
    expect(volume.key !== "", "empty key");
    expect(volume.virtual_size >= size, `virtual_size ${volume.virtual_size} is less than the ${size} bytes asked for`);
    expectEqual(volume.read_write, true, "read_write");
    expectEqual(volume.name, "created «volume»", "name");
    expectEqual(volume.description, "for the create check", "description");
    expectEqual(volume.sharable, false, "sharable");
    expect(volume.uri.length > 0 && volume.uri.every((uri) => uri !== ""), `uri must list at least one URI, got ${show(volume.uri)}`);
    if (volume.volume_type !== undefined) expectEqual(volume.volume_type, "Data", "volume_type");
  }),

  check("Volume.stat answers what Volume.create answered", { features: ["VDI_CREATE"], needs: ["sr"] }, async (t) => {
    const created = await t.createVolume();
    const stat = await t.call("Volume.stat", { sr: t.sr, key: created.key });
    expectEqual(identity(stat), identity(created), "Volume.stat");
  }),

  check("SR.ls lists a new volume", { features: ["VDI_CREATE", "SR_SCAN"], needs: ["sr"] }, async (t) => {
    const created = await t.createVolume({ name: "listed" });
    const listed = (await t.call("SR.ls", { sr: t.sr })).find((volume) => volume.key === created.key);
    expect(listed !== undefined, `SR.ls does not list volume ${created.key}`);
    expectEqual(identity(listed), identity(created), "the SR.ls entry");
  }),

  check("Volume.set and Volume.unset keep keys and values byte-exact", { features: ["VDI_CREATE"], needs: ["sr"], optional: ["Volume.set", "Volume.unset"] }, async (t) => {
    const volume = await t.createVolume();
    await setKeys(t, volume.key, TRICKY_KEYS);
    const expected: Record<string, string> = { ...volume.keys, ...TRICKY_KEYS };
    expectEqual((await t.call("Volume.stat", { sr: t.sr, key: volume.key })).keys, expected, "keys after Volume.set");

    await t.call("Volume.set", { sr: t.sr, key: volume.key, k: "vdi-type", v: "ha_statefile" });
    await t.call("Volume.unset", { sr: t.sr, key: volume.key, k: "newlines" });
    expected["vdi-type"] = "ha_statefile";
    delete expected.newlines;
    expectEqual((await t.call("Volume.stat", { sr: t.sr, key: volume.key })).keys, expected, "keys after overwriting one and unsetting another");
  }),

  check("Volume.set_name and Volume.set_description show in Volume.stat", { features: ["VDI_CREATE"], needs: ["sr"], optional: ["Volume.set_name", "Volume.set_description"] }, async (t) => {
    const volume = await t.createVolume();
    const name = `disk «0» "boot" 'é' ✓`;
    const description = "line one\nline two — 🚀";
    await t.call("Volume.set_name", { sr: t.sr, key: volume.key, new_name: name });
    await t.call("Volume.set_description", { sr: t.sr, key: volume.key, new_description: description });
    const stat = await t.call("Volume.stat", { sr: t.sr, key: volume.key });
    expectEqual(stat.name, name, "name after Volume.set_name");
    expectEqual(stat.description, description, "description after Volume.set_description");
  }),

  check("Volume.snapshot: a read-only volume with the name, description and size of its volume", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume({ name: "snapshotted", description: "its snapshot copies this" });
    const snapshot = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
    t.adoptVolume(snapshot.key);
    expect(snapshot.key !== volume.key, "the snapshot has the key of its volume");
    expectEqual(snapshot.read_write, false, "read_write of the snapshot");
    expectEqual([snapshot.name, snapshot.description], [volume.name, volume.description], "name and description of the snapshot");
    expectEqual(snapshot.virtual_size, volume.virtual_size, "virtual_size of the snapshot");
  }),

  check("Volume.snapshot does not copy keys set with Volume.set", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs: ["sr"], optional: ["Volume.set"] }, async (t) => {
    const volume = await t.createVolume();
    await t.call("Volume.set", { sr: t.sr, key: volume.key, k: "content_id", v: "only on the volume" });
    const snapshot = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
    t.adoptVolume(snapshot.key);
    const stat = await t.call("Volume.stat", { sr: t.sr, key: snapshot.key });
    expect(!("content_id" in stat.keys), `the snapshot has the volume's key content_id (keys ${show(stat.keys)})`);
  }),

  check("Volume.clone: a writable volume with the name, description and size of its volume", { features: ["VDI_CREATE", "VDI_CLONE"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume({ name: "cloned", description: "its clone copies this" });
    const clone = await t.call("Volume.clone", { sr: t.sr, key: volume.key });
    t.adoptVolume(clone.key);
    expect(clone.key !== volume.key, "the clone has the key of its volume");
    expectEqual(clone.read_write, true, "read_write of the clone");
    expectEqual([clone.name, clone.description], [volume.name, volume.description], "name and description of the clone");
    expectEqual(clone.virtual_size, volume.virtual_size, "virtual_size of the clone");
  }),

  check("Volume.clone does not copy keys set with Volume.set", { features: ["VDI_CREATE", "VDI_CLONE"], needs: ["sr"], optional: ["Volume.set"] }, async (t) => {
    const volume = await t.createVolume();
    await t.call("Volume.set", { sr: t.sr, key: volume.key, k: "content_id", v: "only on the volume" });
    const clone = await t.call("Volume.clone", { sr: t.sr, key: volume.key });
    t.adoptVolume(clone.key);
    const stat = await t.call("Volume.stat", { sr: t.sr, key: clone.key });
    expect(!("content_id" in stat.keys), `the clone has the volume's key content_id (keys ${show(stat.keys)})`);
  }),

  check("Volume.resize grows the volume to at least the new size", { features: ["VDI_CREATE", "VDI_RESIZE"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    const newSize = volume.virtual_size + 1024 * 1024 + 3;
    await t.call("Volume.resize", { sr: t.sr, key: volume.key, new_size: newSize });
    const stat = await t.call("Volume.stat", { sr: t.sr, key: volume.key });
    expect(stat.virtual_size >= newSize, `virtual_size ${stat.virtual_size} after Volume.resize to ${newSize}`);
  }),

  check("Volume.resize refuses to shrink", { features: ["VDI_CREATE", "VDI_RESIZE"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    await expectError(t.call("Volume.resize", { sr: t.sr, key: volume.key, new_size: Math.floor(volume.virtual_size / 2) }), "Volume.resize to half the size");
    const stat = await t.call("Volume.stat", { sr: t.sr, key: volume.key });
    expectEqual(stat.virtual_size, volume.virtual_size, "virtual_size after the refused shrink");
  }),

  check("Volume.compare with a missing volume answers a well-formed blocklist", { features: ["VDI_CREATE"], needs: ["sr"], optional: ["Volume.compare"] }, async (t) => {
    const volume = await t.createVolume();
    const blocklist = await t.call("Volume.compare", { sr: t.sr, key: volume.key, key2: missingKey() });
    expectBlocklist(blocklist, volume.virtual_size, "Volume.compare");
  }),

  check("Volume.similar_content lists a snapshot of the volume", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs: ["sr"], optional: ["Volume.similar_content"] }, async (t) => {
    const volume = await t.createVolume();
    const snapshot = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
    t.adoptVolume(snapshot.key);
    const similar = await t.call("Volume.similar_content", { sr: t.sr, key: volume.key });
    expect(similar.includes(snapshot.key), `Volume.similar_content answers ${show(similar)}, without the snapshot ${snapshot.key}`);
  }),

  check("Volume.revert keeps the volume's key and takes the snapshot's size", { features: ["VDI_CREATE", "VDI_SNAPSHOT", "VDI_REVERT"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    const snapshot = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
    t.adoptVolume(snapshot.key);
    await t.call("Volume.revert", { sr: t.sr, snapshot: snapshot.key, key: volume.key });
    const stat = await t.call("Volume.stat", { sr: t.sr, key: volume.key });
    expectEqual(stat.key, volume.key, "key after Volume.revert");
    expectEqual(stat.read_write, true, "read_write after Volume.revert");
    expectEqual(stat.virtual_size, snapshot.virtual_size, "virtual_size after Volume.revert");
  }),

  check("Volume.copy into the same SR makes a writable volume of the same size", { features: ["VDI_CREATE", "VDI_COPY"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    const copy = await t.call("Volume.copy", { sr: t.sr, key: volume.key, dest_sr: t.sr });
    t.adoptVolume(copy.key);
    expect(copy.key !== volume.key, "the copy has the key of its volume");
    expectEqual(copy.read_write, true, "read_write of the copy");
    expectEqual(copy.virtual_size, volume.virtual_size, "virtual_size of the copy");
  }),

  check("Volume.enable_cbt sets cbt_enabled and Volume.disable_cbt clears it", { features: ["VDI_CREATE", "VDI_CONFIG_CBT"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    await t.call("Volume.enable_cbt", { sr: t.sr, key: volume.key });
    expectEqual((await t.call("Volume.stat", { sr: t.sr, key: volume.key })).cbt_enabled, true, "cbt_enabled after Volume.enable_cbt");
    await t.call("Volume.disable_cbt", { sr: t.sr, key: volume.key });
    const after = (await t.call("Volume.stat", { sr: t.sr, key: volume.key })).cbt_enabled;
    expect(after !== true, `cbt_enabled is ${show(after)} after Volume.disable_cbt`);
  }),

  check("Volume.data_destroy of a CBT snapshot leaves a CBT_Metadata volume", { features: ["VDI_CREATE", "VDI_SNAPSHOT", "VDI_CONFIG_CBT"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    await t.call("Volume.enable_cbt", { sr: t.sr, key: volume.key });
    const snapshot = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
    t.adoptVolume(snapshot.key);
    await t.call("Volume.data_destroy", { sr: t.sr, key: snapshot.key });
    expectEqual((await t.call("Volume.stat", { sr: t.sr, key: snapshot.key })).volume_type, "CBT_Metadata", "volume_type after Volume.data_destroy");
  }),

  check("Volume.stat of a destroyed volume fails with Volume_does_not_exist", { features: ["VDI_CREATE", "VDI_DELETE"], needs: ["sr"] }, async (t) => {
    const volume = await t.createVolume();
    await t.destroyVolume(volume.key);
    await expectError(t.call("Volume.stat", { sr: t.sr, key: volume.key }), "Volume.stat of a destroyed volume", "Volume_does_not_exist");
  }),

  check("Volume.stat of an unknown key fails with Volume_does_not_exist", { needs: ["sr"] }, async (t) => {
    await expectError(t.call("Volume.stat", { sr: t.sr, key: missingKey() }), "Volume.stat of an unknown key", "Volume_does_not_exist");
  }),
];
