// The volumes router against a real toolstack and the bundled file plugin: reads through the plugin, every
// change through XenAPI (so the toolstack's own view is checked after each), refusals in words.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { openVolumeData } from "../../plugins/filesr/index.ts";
import { startConsoleUnderTest } from "../testing.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Asserts a call is refused with this tRPC code and a message matching `message`. */
async function refused(promise: Promise<unknown>, code: TRPCError["code"], message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof TRPCError, String(error));
    assert.equal(error.code, code, error.message);
    assert.match(error.message, message);
    return true;
  });
}

test("volumes router", async (t) => {
  const { caller, anonymous, xapi } = await startConsoleUnderTest(t);
  const [pool] = await xapi.call(z.array(z.string()), "pool.get_all");
  const srRef = await xapi.call(z.string(), "pool.get_default_SR", pool);
  const [pbd] = await xapi.call(z.array(z.string()), "SR.get_PBDs", srRef);
  const srPath = (await xapi.call(z.record(z.string(), z.string()), "PBD.get_device_config", pbd)).path!;
  const list = async () => (await caller.volumes.list({ srRef })).volumes;
  const row = async (uuid: string) => {
    const found = (await list()).find((v) => v.uuid === uuid);
    assert.ok(found, `volume ${uuid} listed`);
    return found;
  };
  const vdiOf = (uuid: string) => xapi.call(z.string(), "VDI.get_by_uuid", uuid);

  await t.test("anonymous callers are refused", async () => {
    await refused(anonymous.volumes.list({ srRef }), "UNAUTHORIZED", /Log in/);
    await refused(anonymous.volumes.create({ srRef, name: "x", description: "", size: MiB }), "UNAUTHORIZED", /Log in/);
  });

  let disk = "";
  await t.test("create: a volume through VDI.create as a task, listed with its fields", async () => {
    const made = await caller.volumes.create({ srRef, name: "data disk", description: "for tests", size: 64 * MiB });
    assert.ok(made.uuid);
    assert.match(made.task, /^OpaqueRef:/);
    assert.equal(await xapi.call(z.string(), "task.get_status", made.task), "success", "a task the task page shows");
    disk = made.uuid;
    const listed = await caller.volumes.list({ srRef });
    assert.equal(listed.sr.ref, srRef);
    assert.equal(listed.sr.type, "file");
    assert.ok(listed.features.includes("VDI_REVERT"));
    const volume = await row(disk);
    assert.equal(volume.name, "data disk");
    assert.equal(volume.description, "for tests");
    assert.equal(volume.virtualSize, 64 * MiB);
    assert.equal(volume.readWrite, true);
    assert.equal(volume.isSnapshot, false);
    assert.equal(volume.snapshotOf, null);
    assert.equal(volume.cbtEnabled, false);
    assert.equal(volume.keys["vdi-type"], "user", "the toolstack's keys are listed");
    assert.deepEqual(volume.otherConfig, {});
    assert.equal(await xapi.call(z.string(), "VDI.get_name_label", await vdiOf(disk)), "data disk");
    const stat = await caller.volumes.stat({ srRef, key: volume.key });
    assert.equal(stat.uuid, disk);
  });

  await t.test("sizes out of range are refused with a clear message", async () => {
    const create = (size: number) => caller.volumes.create({ srRef, name: "bad", description: "", size });
    await refused(create(0), "BAD_REQUEST", /more than zero/);
    await refused(create(-MiB), "BAD_REQUEST", /more than zero/);
    await refused(create(1.5), "BAD_REQUEST", /whole number/);
    await refused(create(Number.NaN), "BAD_REQUEST", /number/);
    await refused(create(2 ** 60), "BAD_REQUEST", /too large/);
    await refused(create(2 ** 50), "BAD_REQUEST", /needs 1 PiB but the SR has only .* free/);
    await refused(caller.volumes.create({ srRef, name: "  ", description: "", size: MiB }), "BAD_REQUEST", /name/);
    assert.ok(!(await list()).some((v) => v.name === "bad"));
  });

  await t.test("resize grows the volume; a size not larger than the current one is refused", async () => {
    await caller.volumes.resize({ srRef, uuid: disk, size: 128 * MiB });
    assert.equal((await row(disk)).virtualSize, 128 * MiB);
    await refused(caller.volumes.resize({ srRef, uuid: disk, size: 32 * MiB }), "BAD_REQUEST", /larger than the current 128 MiB/);
    await refused(caller.volumes.resize({ srRef, uuid: disk, size: 128 * MiB }), "BAD_REQUEST", /can only grow/);
    await refused(caller.volumes.resize({ srRef, uuid: disk, size: 2 ** 50 }), "BAD_REQUEST", /free/);
  });

  let snapshot = "";
  await t.test("snapshot and revert: the original gets the snapshot's contents back", async () => {
    const key = (await row(disk)).key;
    const writeByte = async (byte: number) => {
      const volume = await openVolumeData(srPath, key, {});
      await volume.write(MiB, Buffer.alloc(64 * 1024, byte));
      await volume.flush();
      await volume.close();
    };
    const readByte = async () => {
      const volume = await openVolumeData(srPath, key, { readOnly: true });
      const data = Buffer.alloc(64 * 1024);
      await volume.read(MiB, data);
      await volume.close();
      return data[0];
    };
    await writeByte(7);
    const made = await caller.volumes.snapshot({ srRef, uuid: disk });
    assert.ok(made.uuid);
    snapshot = made.uuid;
    const snap = await row(snapshot);
    assert.equal(snap.isSnapshot, true);
    assert.equal(snap.readWrite, false);
    assert.deepEqual(snap.snapshotOf, { key, uuid: disk, name: "data disk" });
    assert.ok(snap.snapshotTime);
    await writeByte(9);
    assert.equal(await readByte(), 9);

    const reverted = await caller.volumes.revert({ srRef, uuid: snapshot });
    assert.equal(reverted.uuid, disk);
    assert.equal(await readByte(), 7, "the snapshot's contents");
    assert.equal((await row(disk)).key, key, "the volume keeps its identity");
    await refused(caller.volumes.revert({ srRef, uuid: disk }), "BAD_REQUEST", /Only a snapshot can be reverted to/);
  });

  let clone = "";
  await t.test("clone, and compare: a clone with its original, a fresh volume with the original", async () => {
    const made = await caller.volumes.clone({ srRef, uuid: disk });
    assert.ok(made.uuid);
    assert.equal((await row(made.uuid)).name, "data disk", "a clone keeps its original's name unless named");
    await caller.volumes.destroy({ srRef, uuid: made.uuid });
    const named = await caller.volumes.clone({ srRef, uuid: disk, name: "the clone" });
    assert.ok(named.uuid);
    clone = named.uuid;
    const [original, cloned] = [await row(disk), await row(clone)];
    assert.equal(cloned.isSnapshot, false);
    assert.equal(cloned.readWrite, true);
    assert.equal(cloned.name, "the clone");

    const same = await caller.volumes.compare({ srRef, a: cloned.key, b: original.key });
    assert.equal(same.blocksize, 64 * 1024);
    assert.equal(same.totalBlocks, (128 * MiB) / (64 * 1024));
    assert.deepEqual([same.changedBlocks, same.ranges], [0, []], "a fresh clone differs in nothing");

    const volume = await openVolumeData(srPath, cloned.key, {});
    await volume.write(3 * MiB, Buffer.alloc(128 * 1024, 1));
    await volume.flush();
    await volume.close();
    const changed = await caller.volumes.compare({ srRef, a: cloned.key, b: original.key });
    assert.deepEqual(changed.ranges, [[(3 * MiB) / (64 * 1024), 2]], "the two blocks written");
    assert.equal(changed.changedBlocks, 2);

    const fresh = await caller.volumes.create({ srRef, name: "fresh", description: "", size: 4 * MiB });
    const unrelated = await caller.volumes.compare({ srRef, a: original.key, b: (await row(fresh.uuid!)).key });
    assert.deepEqual(unrelated.ranges, [[MiB / (64 * 1024), 1]], "unrelated: the blocks holding data in the first");
    await refused(caller.volumes.compare({ srRef, a: original.key, b: original.key }), "BAD_REQUEST", /two different/);
  });

  await t.test("rename, description, keys and CBT through XenAPI", async () => {
    await caller.volumes.rename({ srRef, uuid: clone, name: "renamed clone", description: "new words" });
    const vdi = await vdiOf(clone);
    assert.equal(await xapi.call(z.string(), "VDI.get_name_label", vdi), "renamed clone");
    assert.equal(await xapi.call(z.string(), "VDI.get_name_description", vdi), "new words");
    await caller.volumes.addKey({ srRef, uuid: clone, key: "owner", value: "team a" });
    await caller.volumes.addKey({ srRef, uuid: clone, key: "tier", value: "gold" });
    await refused(caller.volumes.addKey({ srRef, uuid: clone, key: "tier", value: "silver" }), "CONFLICT", /"tier" is already set/);
    await caller.volumes.removeKey({ srRef, uuid: clone, key: "owner" });
    assert.deepEqual(await xapi.call(z.record(z.string(), z.string()), "VDI.get_other_config", vdi), { tier: "gold" });
    const listed = await row(clone);
    assert.deepEqual([listed.name, listed.description, listed.otherConfig], ["renamed clone", "new words", { tier: "gold" }]);

    await caller.volumes.setCbt({ srRef, uuid: clone, enabled: true });
    assert.equal((await row(clone)).cbtEnabled, true);
    assert.equal(await xapi.call(z.boolean(), "VDI.get_cbt_enabled", vdi), true);
    await caller.volumes.setCbt({ srRef, uuid: clone, enabled: false });
    assert.equal((await row(clone)).cbtEnabled, false);
  });

  await t.test("copy to another SR: a task started at once, the copy in the other SR", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-volumes-copy-"));
    const [host] = await xapi.call(z.array(z.string()), "host.get_all");
    const other = await xapi.call(z.string(), "SR.create", host, { path: join(dir, "sr") }, "0", "copy target", "", "file", "user", false, {});
    t.after(async () => {
      await xapi.call(z.unknown(), "SR.destroy", other).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    });
    const targets = await caller.volumes.copyTargets({ srRef });
    assert.deepEqual(targets.map((s) => s.name), ["copy target"], "every other attached SR, not this one");
    await refused(caller.volumes.copy({ srRef, uuid: disk, destSrRef: srRef }), "BAD_REQUEST", /another SR/);
    const { task } = await caller.volumes.copy({ srRef, uuid: disk, destSrRef: other });
    const done = await xapi.waitTask(task);
    assert.equal(done.status, "success", done.error_info.join(" "));
    const copies = (await caller.volumes.list({ srRef: other })).volumes;
    assert.deepEqual(copies.map((v) => [v.name, v.virtualSize]), [["data disk", 128 * MiB]]);
  });

  await t.test("destroy; a volume destroyed elsewhere is refused in words", async () => {
    const made = await caller.volumes.create({ srRef, name: "short-lived", description: "", size: MiB });
    await caller.volumes.destroy({ srRef, uuid: made.uuid! });
    assert.ok(!(await list()).some((v) => v.uuid === made.uuid));
    const gone = /The volume no longer exists: it may have been destroyed in another window/;
    await refused(caller.volumes.destroy({ srRef, uuid: made.uuid! }), "NOT_FOUND", gone);
    await refused(caller.volumes.resize({ srRef, uuid: made.uuid!, size: GiB }), "NOT_FOUND", gone);
    await refused(caller.volumes.rename({ srRef, uuid: made.uuid!, name: "x", description: "" }), "NOT_FOUND", gone);
    await refused(caller.volumes.stat({ srRef, key: "no-such-volume" }), "NOT_FOUND", /Volume_does_not_exist|no-such-volume/);

    // Destroyed behind the console's back after the page listed it: the snapshot's original.
    await xapi.call(z.unknown(), "VDI.destroy", await vdiOf(disk));
    await refused(caller.volumes.snapshot({ srRef, uuid: disk }), "NOT_FOUND", gone);
    await refused(caller.volumes.revert({ srRef, uuid: snapshot }), "BAD_REQUEST", /The volume this snapshot was taken of no longer exists/);
    assert.equal((await row(snapshot)).snapshotOf, null, "a snapshot whose original is gone");
  });

  await t.test("an unknown or detached SR is refused in words", async () => {
    await refused(caller.volumes.list({ srRef: "OpaqueRef:nope" }), "NOT_FOUND", /The SR no longer exists/);
  });
});
