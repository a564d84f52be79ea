// Datapath.*: the states a volume goes through for a VM, and what the data does across them.
import { stat } from "node:fs/promises";
import { Attachment, plug } from "../attachment.ts";
import { type Check, check } from "../check.ts";
import { expect, expectEqual, expectError, show } from "../expect.ts";
import { expectAreas, testAreas, writeAreas } from "../pattern.ts";

const needs = ["sr", "datapath"] as const;
const features = ["VDI_CREATE"];

export const datapathChecks: Check[] = [
  check("Datapath.attach answers implementations, the same when called twice", { features, needs }, async (t) => {
    const volume = await t.createVolume();
    const attachment = await Attachment.open(t, await t.datapathUri(volume));
    const first = await attachment.attach();
    expect(first.length > 0, "Datapath.attach answered no implementations");
    const second = await attachment.attach();
    expectEqual(second, first, "second Datapath.attach");
    await attachment.release();
  }),

  check("Datapath.activate twice succeeds", { features, needs }, async (t) => {
    const volume = await t.createVolume();
    const attachment = await plug(t, volume);
    await attachment.activate();
    await attachment.release();
  }),

  check("data written through the datapath reads back after deactivate, detach, close and a new open", { features, needs }, async (t) => {
    const volume = await t.createVolume();
    const [first, middle, last] = testAreas(volume.virtual_size);
    const writer = await plug(t, volume);
    await writeAreas(await writer.disk(), [first!, last!], "persisted");
    await writer.release();
    const reader = await plug(t, volume);
    const disk = await reader.disk();
    await expectAreas(disk, [first!, last!], "persisted", `${disk.kind} ${disk.location} after reopening`);
    await expectAreas(disk, [middle!], null, `${disk.kind} ${disk.location}, never written,`);
    await reader.release();
  }),

  check("Datapath.deactivate, Datapath.detach twice and Datapath.close succeed", { features, needs }, async (t) => {
    const volume = await t.createVolume();
    const attachment = await plug(t, volume);
    await attachment.deactivate();
    await attachment.detach();
    await t.call("Datapath.detach", { uri: attachment.uri, domain: attachment.domain });
    await attachment.close();
  }),

  check("a non-persistent open discards its writes on close", { features: ["VDI_CREATE", "NONPERSISTENT"], needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    const base = await plug(t, volume);
    await writeAreas(await base.disk(), areas, "kept");
    await base.release();

    const scratch = await plug(t, volume, { persistent: false });
    const disk = await scratch.disk();
    await writeAreas(disk, areas, "discarded");
    await expectAreas(disk, areas, "discarded", "the non-persistent disk while open", ["kept"]);
    await scratch.release();

    const after = await plug(t, volume);
    await expectAreas(await after.disk(), areas, "kept", "the volume after closing the non-persistent open", ["discarded"]);
    await after.release();
  }),

  check("Datapath.activate_readonly allows reads and refuses writes", { features: ["VDI_CREATE", "VDI_ACTIVATE_READONLY"], needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    const writer = await plug(t, volume);
    await writeAreas(await writer.disk(), areas, "written");
    await writer.release();

    const reader = await Attachment.open(t, await t.datapathUri(volume));
    await reader.attach();
    await reader.activateReadonly();
    const disk = await reader.disk({ prefer: ["Nbd"], readOnly: true });
    // A File or BlockDevice path is opened by the caller, who alone decides whether it writes.
    if (disk.kind !== "Nbd") t.skip(`a ${disk.kind} implementation cannot refuse writes; needs an Nbd one`);
    await expectAreas(disk, areas, "written", "the read-only disk");
    const write = disk.write(0, Buffer.alloc(4096, 1)).then(() => "accepted", () => "refused");
    expectEqual(await write, "refused", "a write through the read-only activation");
    await reader.release();
  }),

  check("Datapath.activate_readonly is refused while the volume is activated read-write", { features: ["VDI_CREATE", "VDI_ACTIVATE_READONLY"], needs }, async (t) => {
    const volume = await t.createVolume();
    const writer = await plug(t, volume);
    const reader = { uri: writer.uri, domain: "1" };
    await t.call("Datapath.attach", reader);
    t.defer("Datapath.detach for the second domain", () => t.call("Datapath.detach", reader));
    const activation = t.call("Datapath.activate_readonly", reader).then((result) => {
      t.defer("Datapath.deactivate for the second domain", () => t.call("Datapath.deactivate", reader));
      return result;
    });
    await expectError(activation, "Datapath.activate_readonly while activated read-write by another domain");
  }),

  check("Datapath.import_activate answers a socket path that exists", { features: ["VDI_CREATE", "VDI_MIRROR_IN"], needs }, async (t) => {
    const volume = await t.createVolume();
    const attachment = await plug(t, volume);
    const path = await t.call("Datapath.import_activate", { uri: attachment.uri, domain: attachment.domain });
    const info = await stat(path).catch(() => undefined);
    expect(info !== undefined, `Datapath.import_activate answered ${show(path)}, which does not exist`);
    expect(info.isSocket(), `Datapath.import_activate answered ${show(path)}, which is not a socket`);
    await attachment.release();
  }),
];
