// Volume.* semantics that only the data can show: written through the datapath under test, then read back
// from snapshots, reverted volumes, copies, and compared with what compare and CBT report.
import type { Blocklist, Volume } from "../../storage/types.ts";
import { plug, plugForReading } from "../attachment.ts";
import { type Check, check } from "../check.ts";
import type { CheckContext } from "../context.ts";
import { expect, show } from "../expect.ts";
import { type Area, expectAreas, testAreas, writeAreas } from "../pattern.ts";
import { expectBlocklist } from "./volume.ts";

const needs = ["sr", "datapath"] as const;

/** Writes `seed` into the areas through a fresh open/attach/activate, then releases the volume. */
async function writeVolume(t: CheckContext, volume: Volume, areas: readonly Area[], seed: string): Promise<void> {
  const attachment = await plug(t, volume);
  await writeAreas(await attachment.disk(), areas, seed);
  await attachment.release();
}

async function expectVolume(t: CheckContext, volume: Volume, areas: readonly Area[], seed: string | null, what: string, others: readonly string[] = []): Promise<void> {
  const attachment = await plugForReading(t, volume);
  await expectAreas(await attachment.disk({ readOnly: true }), areas, seed, what, others);
  await attachment.release();
}

async function snapshot(t: CheckContext, volume: Volume): Promise<Volume> {
  const snap = await t.call("Volume.snapshot", { sr: t.sr, key: volume.key });
  t.adoptVolume(snap.key);
  return snap;
}

/** Fails unless every area lies inside the blocklist's ranges. */
function expectCovered(blocklist: Blocklist, areas: readonly Area[], what: string): void {
  const { blocksize, ranges } = blocklist;
  for (const area of areas) {
    for (let block = Math.floor(area.offset / blocksize); block * blocksize < area.offset + area.length; block++) {
      const covered = ranges.some(([start, length]) => block >= start && block < start + length);
      expect(covered, `${what}: bytes ${area.offset}..${area.offset + area.length} were written but block ${block} (of ${blocksize} bytes) is not listed in ${show(ranges)}`);
    }
  }
}

/** Bit i of a base64 bitmap, most significant bit of each byte first (as xapi's CBT bitmaps are read). */
function bitSet(bitmap: Buffer, index: number): boolean {
  const byte = bitmap[index >> 3];
  return byte !== undefined && (byte & (0x80 >> (index & 7))) !== 0;
}

export const volumeDataChecks: Check[] = [
  check("a snapshot keeps the data its volume had when it was taken", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    await writeVolume(t, volume, areas, "before");
    const snap = await snapshot(t, volume);
    await writeVolume(t, volume, areas, "after");
    await expectVolume(t, snap, areas, "before", "the snapshot", ["after"]);
    await expectVolume(t, volume, areas, "after", "the volume", ["before"]);
  }),

  check("Volume.snapshot of a volume active on this host keeps the data written so far", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs }, async (t) => {
    // Only activation on another host may refuse a snapshot (Activated_on_another_host): a running VM's
    // disks are snapshotted while active.
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    const attachment = await plug(t, volume);
    const disk = await attachment.disk();
    await writeAreas(disk, areas, "before");
    const snap = await snapshot(t, volume);
    await writeAreas(disk, areas, "after");
    await attachment.release();
    await expectVolume(t, snap, areas, "before", "the snapshot", ["after"]);
  }),

  check("Volume.compare with a missing or an unrelated volume covers the written blocks", { features: ["VDI_CREATE"], needs, optional: ["Volume.compare"] }, async (t) => {
    const volume = await t.createVolume();
    const unrelated = await t.createVolume({ name: "unrelated" });
    const areas = testAreas(volume.virtual_size);
    await writeVolume(t, volume, areas, "data");
    const others: [string, string][] = [[`hangar-conformance-missing-${volume.key}`, "a missing volume"], [unrelated.key, "an unrelated volume"]];
    for (const [key2, what] of others) {
      const blocklist = await t.call("Volume.compare", { sr: t.sr, key: volume.key, key2 });
      expectBlocklist(blocklist, volume.virtual_size, `Volume.compare with ${what}`);
      expectCovered(blocklist, areas, `Volume.compare with ${what}`);
    }
  }),

  check("Volume.compare with a snapshot covers the blocks written since", { features: ["VDI_CREATE", "VDI_SNAPSHOT"], needs, optional: ["Volume.compare"] }, async (t) => {
    const volume = await t.createVolume();
    const [first, ...later] = testAreas(volume.virtual_size);
    await writeVolume(t, volume, [first!], "before");
    const snap = await snapshot(t, volume);
    await writeVolume(t, volume, later, "after");
    const blocklist = await t.call("Volume.compare", { sr: t.sr, key: volume.key, key2: snap.key });
    expectBlocklist(blocklist, volume.virtual_size, "Volume.compare");
    expectCovered(blocklist, later, "Volume.compare with a snapshot");
  }),

  check("Volume.revert gives the volume the snapshot's data", { features: ["VDI_CREATE", "VDI_SNAPSHOT", "VDI_REVERT"], needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    await writeVolume(t, volume, areas, "snapshotted");
    const snap = await snapshot(t, volume);
    await writeVolume(t, volume, areas, "discarded");
    await t.call("Volume.revert", { sr: t.sr, snapshot: snap.key, key: volume.key });
    await expectVolume(t, volume, areas, "snapshotted", "the reverted volume", ["discarded"]);
  }),

  check("Volume.copy copies the data", { features: ["VDI_CREATE", "VDI_COPY"], needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    await writeVolume(t, volume, areas, "original");
    const copy = await t.call("Volume.copy", { sr: t.sr, key: volume.key, dest_sr: t.sr });
    t.adoptVolume(copy.key);
    await expectVolume(t, copy, areas, "original", "the copy");
  }),

  check("Volume.list_changed_blocks between two CBT snapshots marks the written areas", { features: ["VDI_CREATE", "VDI_SNAPSHOT", "VDI_CONFIG_CBT"], needs }, async (t) => {
    const volume = await t.createVolume();
    await t.call("Volume.enable_cbt", { sr: t.sr, key: volume.key });
    const from = await snapshot(t, volume);
    const areas = testAreas(volume.virtual_size);
    await writeVolume(t, volume, areas, "changed");
    const to = await snapshot(t, volume);
    const changed = await t.call("Volume.list_changed_blocks", { sr: t.sr, key: from.key, key2: to.key, offset: 0, length: -1 });
    expect(changed.granularity > 0, `granularity is ${changed.granularity}`);
    const bitmap = Buffer.from(changed.bitmap, "base64");
    for (const area of areas) {
      for (let bit = Math.floor(area.offset / changed.granularity); bit * changed.granularity < area.offset + area.length; bit++) {
        expect(bitSet(bitmap, bit), `bit ${bit} (bytes ${bit * changed.granularity}.., granularity ${changed.granularity}) is not set though the area was written`);
      }
    }
  }),
];
