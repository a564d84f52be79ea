// The table's rows from a listing, without a toolstack: snapshots linked by the keys the toolstack keeps,
// clone-on-boot transients hidden, uuids as the toolstack derives them; compare runs merged.
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Volume } from "../../storage/types.ts";
import { vdiUuid } from "../../xenapi/vdi-identity.ts";
import { volumeRows } from "./list-volumes.ts";
import { mergeRanges } from "./read-volume.ts";

const volume = (key: string, fields: Partial<Volume> = {}): Volume => ({
  key,
  uuid: `uuid-${key}`,
  name: key,
  description: "",
  read_write: true,
  sharable: false,
  virtual_size: 1024,
  physical_utilisation: 0,
  uri: [],
  keys: {},
  ...fields,
});

test("volumeRows: snapshots and their originals, transients hidden, derived uuids, other_config", () => {
  const rows = volumeRows("sr-uuid", [
    volume("disk", { keys: { "vdi-type": "user", _other_config_owner: "a", _sm_config_x: "y" }, cbt_enabled: true, volume_type: "Data_and_CBT_Metadata" }),
    volume("snap", { read_write: false, keys: { is_a_snapshot: "true", snapshot_of: "disk", snapshot_time: "20260102T03:04:05Z" } }),
    volume("orphan", { read_write: false, keys: { is_a_snapshot: "true", snapshot_of: "gone" } }),
    volume("no-uuid", { uuid: undefined }),
    volume("boot", { keys: { "clone-on-boot": "transient" } }),
    volume("transient"),
  ]);
  assert.deepEqual(rows.map((r) => r.key), ["disk", "snap", "orphan", "no-uuid", "boot"], "the clone-on-boot transient is hidden");
  const [disk, snap, orphan, noUuid] = rows;
  assert.deepEqual(disk?.otherConfig, { owner: "a" });
  assert.equal(disk?.keys._sm_config_x, "y");
  assert.deepEqual([disk?.cbtEnabled, disk?.volumeType, disk?.isSnapshot, disk?.snapshotOf, disk?.snapshotTime], [true, "Data_and_CBT_Metadata", false, null, null]);
  assert.deepEqual([snap?.isSnapshot, snap?.readWrite, snap?.snapshotOf, snap?.snapshotTime], [true, false, { key: "disk", uuid: "uuid-disk", name: "disk" }, "20260102T03:04:05Z"]);
  assert.deepEqual([orphan?.isSnapshot, orphan?.snapshotOf], [true, null], "an original that is gone");
  assert.equal(noUuid?.uuid, vdiUuid("sr-uuid", { key: "no-uuid" }), "the toolstack's uuid for a volume without one");
});

test("volumeRows of 10,000 volumes is quick", () => {
  const volumes = Array.from({ length: 10_000 }, (_, i) => volume(`v${i}`, { keys: i % 2 ? { is_a_snapshot: "true", snapshot_of: `v${i - 1}` } : {} }));
  const started = performance.now();
  const rows = volumeRows("sr", volumes);
  const ms = performance.now() - started;
  assert.equal(rows.length, 10_000);
  assert.equal(rows[1]?.snapshotOf?.key, "v0");
  assert.ok(ms < 200, `${ms.toFixed(0)} ms`);
});

test("mergeRanges: sorted, overlapping and touching runs joined, empty ones dropped", () => {
  assert.deepEqual(mergeRanges([]), []);
  assert.deepEqual(
    mergeRanges([
      [10, 2],
      [0, 3],
      [3, 1],
      [11, 5],
      [20, 0],
      [30, 1],
    ]),
    [
      [0, 4],
      [10, 6],
      [30, 1],
    ],
  );
});
