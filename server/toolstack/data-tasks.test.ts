// Data work as tasks, through real HTTP JSON-RPC and the bundled plugins: VDI.copy between two SRs
// (byte-identical, progress up to 1), Hangar's copy and mirror of a VDI to remote NBD servers (nbdkit),
// a copy cancelled, a copy that fails with the datapath's reason, and nothing left plugged afterwards.
import assert from "node:assert/strict";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test, type TestContext } from "node:test";
import { NbdClient } from "../nbd/client.ts";
import { startProcess, waitForSocket } from "../nbd/testing.ts";
import { pattern } from "../plugins/datapath/nbd/test-support.ts";
import { openVolumeData } from "../plugins/filesr/index.ts";
import type { PluginClient } from "../storage/client.ts";
import { defaultPluginRoot, scanPluginRoot } from "../storage/registry.ts";
import { daemonPids, MiB, startTestToolstack, type TestToolstack, type XenApiClient, xenError } from "./storage-testing.ts";

const dbg = "toolstack data task test";

describe("data tasks", () => {
  let host: TestToolstack;
  let client: XenApiClient;
  let nbd: PluginClient;
  let defaultSr: string;
  let otherSr: string;
  let serial = 0;

  /** An SR's directory (its PBD's device_config). */
  async function srPath(sr: string): Promise<string> {
    const [pbd] = await client.call<string[]>("SR.get_PBDs", sr);
    return (await client.call<Record<string, string>>("PBD.get_device_config", pbd)).path!;
  }

  /** A VDI with data at a few places and holes between; answers it and its whole content. */
  async function filledVdi(size: number, sr = defaultSr): Promise<{ vdi: string; content: Buffer }> {
    const vdi = await client.call<string>("VDI.create", { SR: sr, virtual_size: size, name_label: `filled ${serial++}`, other_config: { origin: "test" } });
    const content = Buffer.alloc(size);
    const volume = await openVolumeData(await srPath(sr), await client.call<string>("VDI.get_location", vdi), {});
    for (const [offset, length] of [[0, MiB], [5 * MiB + 4096, 3 * MiB], [size - MiB, MiB]] as const) {
      const data = pattern(offset, length);
      await volume.write(offset, data);
      data.copy(content, offset);
    }
    await volume.flush();
    await volume.close();
    return { vdi, content };
  }

  async function vdiContent(vdi: string): Promise<Buffer> {
    const sr = await client.call<string>("VDI.get_SR", vdi);
    const volume = await openVolumeData(await srPath(sr), await client.call<string>("VDI.get_location", vdi), { readOnly: true });
    const content = Buffer.alloc(volume.size);
    await volume.read(0, content);
    await volume.close();
    return content;
  }

  async function nbdkit(t: TestContext, args: string[]): Promise<string> {
    const socket = join(host.dataDir, `nbdkit-${serial++}.sock`);
    startProcess((fn) => t.after(fn), "nbdkit", ["--unix", socket, "--foreground", ...args]);
    await waitForSocket(socket);
    return `nbd+unix:///?socket=${socket}`;
  }

  /** Nothing the tasks plugged stays: no operation, no open volume, no volume daemon (they stop after their copies). */
  async function assertReleased(): Promise<void> {
    assert.deepEqual(await nbd.call("Data.ls", { dbg }), [], "every data operation was forgotten (Data.destroy)");
    assert.deepEqual(await nbd.call("Plugin.ls", { dbg }), [], "no volume is open in the nbd datapath");
    for (let i = 0; daemonPids(host.dataDir).length > 0 && i < 100; i++) await sleep(100);
    assert.deepEqual(daemonPids(host.dataDir), [], "no volume daemon is left");
  }

  before(async () => {
    host = await startTestToolstack();
    client = host.client;
    nbd = (await scanPluginRoot(defaultPluginRoot())).find("nbd", "datapath")!.client;
    defaultSr = await client.call<string>("pool.get_default_SR", (await client.call<string[]>("pool.get_all"))[0]);
    const [hostRef] = await client.call<string[]>("host.get_all");
    otherSr = await client.call<string>("SR.create", hostRef, { path: join(host.dataDir, "other-sr") }, 0, "other", "", "file", "user", false, {});
  });
  after(() => host.stop());

  test("Async.VDI.copy to another SR: a task with progress up to 1, the copy byte-identical with the source's fields", async () => {
    const { vdi, content } = await filledVdi(48 * MiB);
    const task = await client.call<string>("Async.VDI.copy", vdi, otherSr);
    const seen = new Set<number>();
    let record: Record<string, unknown>;
    do {
      record = await client.call<Record<string, unknown>>("task.get_record", task);
      seen.add(Number(record.progress));
    } while (record.status === "pending");
    assert.equal(record.status, "success", JSON.stringify(record.error_info));
    assert.equal(record.progress, 1);
    assert.ok([...seen].every((p) => p >= 0 && p <= 1));
    // What it worked on, kept on the task: a finished one reads (and is found by name) without its volumes.
    const name = await client.call<string>("VDI.get_name_label", vdi);
    assert.equal(record.name_description, `Copy of volume “${name}” to SR “other”`);
    const state = JSON.parse((record.other_config as Record<string, string>)["hangar:data-operation"]!) as Record<string, unknown>;
    assert.deepEqual([state.name, state.size], [name, 48 * MiB]);
    const copy = /(OpaqueRef:[0-9a-f-]+)/.exec(String(record.result))?.[1];
    assert.ok(copy !== undefined, `task result names the copy: ${String(record.result)}`);

    const copied = await client.call<Record<string, unknown>>("VDI.get_record", copy);
    assert.equal(copied.SR, otherSr);
    assert.equal(copied.virtual_size, 48 * MiB);
    assert.deepEqual(copied.other_config, { origin: "test" });
    assert.equal(copied.is_a_snapshot, false);
    assert.deepEqual(copied.current_operations, {});
    assert.ok((await vdiContent(copy)).equals(content), "the copy holds the source's bytes");
    await assertReleased();
  });

  test("a plain VDI.copy is a task too, and answers the copy", async () => {
    const { vdi, content } = await filledVdi(16 * MiB, otherSr);
    const copy = await client.call<string>("VDI.copy", vdi, defaultSr);
    assert.equal(await client.call("VDI.get_SR", copy), defaultSr);
    assert.ok((await vdiContent(copy)).equals(content));
    const tasks = await client.call<Record<string, Record<string, unknown>>>("task.get_all_records");
    assert.ok(Object.values(tasks).some((t) => t.name_label === "VDI.copy" && t.status === "success"));
  });

  test("VDI.hangar_data_copy to an NBD server: identical bytes, holes zeroed", async (t) => {
    const { vdi, content } = await filledVdi(16 * MiB);
    const remote = await nbdkit(t, ["memory", "16M"]);
    const target = await NbdClient.connect(remote);
    t.after(() => target.close());
    await target.write(0, Buffer.alloc(16 * MiB, 0x5a)); // not pre-zeroed: the holes must be written
    const task = await client.call<string>("Async.VDI.hangar_data_copy", vdi, remote);
    const record = await client.waitTask(task);
    assert.equal(record.status, "success", JSON.stringify(record.error_info));
    assert.ok((await target.read(0, 16 * MiB)).equals(content));
    assert.equal(await client.call("task.get_name_description", task), `Copy of volume “${await client.call<string>("VDI.get_name_label", vdi)}” to ${remote}`);
    await assertReleased();
  });

  test("task.cancel of a copy to a remote: Data.cancel, the task cancelled, nothing left plugged", async (t) => {
    const { vdi } = await filledVdi(16 * MiB);
    // Every write of data waits 2 s at the remote: the copy runs a few seconds.
    const remote = await nbdkit(t, ["--filter=delay", "memory", "16M", "delay-write=2"]);
    const task = await client.call<string>("Async.VDI.hangar_data_copy", vdi, remote);
    for (let i = 0; (await nbd.call("Data.ls", { dbg })).length === 0 && i < 100; i++) await sleep(100);
    assert.deepEqual(Object.values(await client.call<Record<string, string>>("VDI.get_current_operations", vdi)), ["copy"]);
    assert.equal((await xenError(client.call("VDI.destroy", vdi))).code, "VDI_IN_USE");
    await client.call("task.cancel", task);
    const record = await client.waitTask(task);
    assert.equal(record.status, "cancelled");
    assert.deepEqual(record.error_info, ["TASK_CANCELLED", task]);
    assert.ok(Number(record.progress) < 1);
    assert.deepEqual(await client.call("VDI.get_current_operations", vdi), {});
    await assertReleased();
  });

  test("task.cancel of a VDI.copy: the half-made copy is destroyed", async () => {
    const before = new Set(await client.call<string[]>("SR.get_VDIs", otherSr));
    const { vdi } = await filledVdi(64 * MiB);
    const task = await client.call<string>("Async.VDI.copy", vdi, otherSr);
    await client.call("task.cancel", task);
    const record = await client.waitTask(task);
    assert.equal(record.status, "cancelled");
    await client.call("SR.scan", otherSr);
    assert.deepEqual(new Set(await client.call<string[]>("SR.get_VDIs", otherSr)), before, "the cancelled copy's volume is gone");
    await assertReleased();
  });

  test("a copy fails with the plugin's reason: a remote nobody serves, a remote that dies mid-copy", async (t) => {
    const { vdi } = await filledVdi(16 * MiB);
    const nowhere = `nbd+unix:///?socket=${join(host.dataDir, "nobody-listens.sock")}`;
    const refused = await client.waitTask(await client.call<string>("Async.VDI.hangar_data_copy", vdi, nowhere));
    assert.equal(refused.status, "failure");
    assert.equal((refused.error_info as string[])[0], "SR_BACKEND_FAILURE");
    assert.match((refused.error_info as string[]).join(" "), /nobody-listens\.sock/, "the plugin's own error");
    await assertReleased();

    const socket = join(host.dataDir, `dying-${serial++}.sock`);
    const remote = startProcess((fn) => t.after(fn), "nbdkit", ["--unix", socket, "--foreground", "--filter=delay", "memory", "16M", "delay-write=2"]);
    await waitForSocket(socket);
    const task = await client.call<string>("Async.VDI.hangar_data_copy", vdi, `nbd+unix:///?socket=${socket}`);
    for (let i = 0; (await nbd.call("Data.ls", { dbg })).length === 0 && i < 100; i++) await sleep(100);
    remote.kill("SIGKILL");
    const record = await client.waitTask(task);
    assert.equal(record.status, "failure");
    const [code, reason] = record.error_info as string[];
    assert.equal(code, "VDI_COPY_FAILED");
    assert.match(reason!, /copy \S+ failed/, `the datapath's diagnostics tell why: ${reason}`);
    await assertReleased();
    assert.equal((await xenError(client.call("VDI.hangar_data_copy", vdi, "http://not-nbd/"))).code, "INVALID_VALUE");
  });

  test("VDI.hangar_data_mirror: writes through the datapath reach the remote until the task is cancelled", async (t) => {
    const { vdi } = await filledVdi(16 * MiB);
    const remote = await nbdkit(t, ["memory", "16M"]);
    const task = await client.call<string>("Async.VDI.hangar_data_mirror", vdi, remote);
    for (let i = 0; (await nbd.call("Data.ls", { dbg })).length === 0 && i < 100; i++) await sleep(100);
    assert.deepEqual((await nbd.call("Data.ls", { dbg })).map((op) => op[0]), ["MirrorV1"]);
    // A VM's writes, through the same datapath (another domain).
    const uri = await volumeUri(vdi);
    await nbd.call("Datapath.open", { dbg, uri, persistent: true });
    const { implementations } = await nbd.call("Datapath.attach", { dbg, uri, domain: "vm1" });
    await nbd.call("Datapath.activate", { dbg, uri, domain: "vm1" });
    const implementation = implementations.find((i) => i[0] === "Nbd");
    assert.ok(implementation !== undefined && implementation[0] === "Nbd");
    const writer = await NbdClient.connect(implementation[1].uri);
    const data = pattern(99, MiB);
    await writer.write(2 * MiB, data);
    await writer.flush();
    await writer.close();
    const target = await NbdClient.connect(remote);
    t.after(() => target.close());
    assert.ok((await target.read(2 * MiB, MiB)).equals(data), "the write was mirrored");

    assert.equal((await client.call<Record<string, unknown>>("task.get_record", task)).status, "pending", "a mirror runs until cancelled");
    await client.call("task.cancel", task);
    assert.equal((await client.waitTask(task)).status, "cancelled");
    await nbd.call("Datapath.deactivate", { dbg, uri, domain: "vm1" });
    await nbd.call("Datapath.detach", { dbg, uri, domain: "vm1" });
    await nbd.call("Datapath.close", { dbg, uri });
    await assertReleased();
  });

  test("VDI.hangar_data_mirror_to_vdi: writes reach a volume of another SR until cancelled; it stays, released", async (t) => {
    const { vdi } = await filledVdi(16 * MiB);
    const dest = await client.call<string>("VDI.create", { SR: otherSr, virtual_size: 16 * MiB, name_label: `mirror target ${serial++}` });
    const small = await client.call<string>("VDI.create", { SR: otherSr, virtual_size: 8 * MiB, name_label: `too small ${serial++}` });
    assert.equal((await xenError(client.call("VDI.hangar_data_mirror_to_vdi", vdi, vdi))).code, "INVALID_VALUE");
    const refused = await client.waitTask(await client.call<string>("Async.VDI.hangar_data_mirror_to_vdi", vdi, small));
    assert.equal(refused.status, "failure");
    assert.equal((refused.error_info as string[])[0], "MIRROR_FAILED");
    assert.match((refused.error_info as string[])[2]!, /smaller than the source/);

    const task = await client.call<string>("Async.VDI.hangar_data_mirror_to_vdi", vdi, dest);
    for (let i = 0; (await nbd.call("Data.ls", { dbg })).length === 0 && i < 100; i++) await sleep(100);
    assert.deepEqual((await nbd.call("Data.ls", { dbg })).map((op) => op[0]), ["MirrorV1"]);
    assert.deepEqual(Object.values(await client.call<Record<string, string>>("VDI.get_current_operations", dest)), ["mirror"], "the target is busy");
    assert.equal((await xenError(client.call("VDI.destroy", dest))).code, "VDI_IN_USE");
    const another = await client.call<string>("VDI.create", { SR: defaultSr, virtual_size: MiB, name_label: `another ${serial++}` });
    assert.equal((await xenError(client.call("VDI.hangar_data_mirror_to_vdi", another, dest))).code, "VDI_IN_USE");

    // A VM's write through the source's datapath lands in the target volume.
    const uri = await volumeUri(vdi);
    await nbd.call("Datapath.open", { dbg, uri, persistent: true });
    const { implementations } = await nbd.call("Datapath.attach", { dbg, uri, domain: "vm2" });
    await nbd.call("Datapath.activate", { dbg, uri, domain: "vm2" });
    const implementation = implementations.find((i) => i[0] === "Nbd");
    assert.ok(implementation !== undefined && implementation[0] === "Nbd");
    const writer = await NbdClient.connect(implementation[1].uri);
    t.after(() => writer.close().catch(() => undefined));
    const data = pattern(7, MiB);
    await writer.write(3 * MiB, data);
    await writer.flush();
    await writer.close();

    assert.equal((await client.call<Record<string, unknown>>("task.get_record", task)).status, "pending", "a mirror runs until cancelled");
    await client.call("task.cancel", task);
    assert.equal((await client.waitTask(task)).status, "cancelled");
    await nbd.call("Datapath.deactivate", { dbg, uri, domain: "vm2" });
    await nbd.call("Datapath.detach", { dbg, uri, domain: "vm2" });
    await nbd.call("Datapath.close", { dbg, uri });
    await assertReleased();
    assert.ok((await vdiContent(dest)).subarray(3 * MiB, 4 * MiB).equals(data), "the write was mirrored into the target volume");
    assert.deepEqual(await client.call("VDI.get_current_operations", dest), {}, "the target is free again, and kept");
  });

  async function volumeUri(vdi: string): Promise<string> {
    const sr = await client.call<string>("VDI.get_SR", vdi);
    return `nbd://${await srPath(sr)}?volume=${await client.call<string>("VDI.get_location", vdi)}`;
  }

});
