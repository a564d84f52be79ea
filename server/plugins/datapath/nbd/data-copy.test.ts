// Data.copy through the real plugin client to real NBD servers (qemu-nbd, nbdkit), and the life of the
// operation: progress, Data.ls, Data.destroy refused while it runs, Data.cancel, a worker killed mid-copy.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test, type TestContext } from "node:test";
import { NbdClient } from "../../../nbd/client.ts";
import { startProcess, waitForSocket } from "../../../nbd/testing.ts";
import type { Operation } from "../../../storage/types.ts";
import { dbg, MiB, pattern, TestHangar, type TestVolume } from "./test-support.ts";

describe("Data.copy", () => {
  let hangar: TestHangar;
  let serial = 0;

  before(async () => {
    hangar = await TestHangar.start();
  });
  after(() => hangar.stop());

  /** A volume with data in a few places and holes elsewhere, detached again; answers its content. */
  async function filledVolume(size: number): Promise<{ volume: TestVolume; content: Buffer }> {
    const volume = await hangar.createVolume(size);
    const content = Buffer.alloc(size);
    const client = await NbdClient.connect(await hangar.plug(volume.uri, "d1"));
    for (const [offset, length] of [[0, MiB], [3 * MiB + 4096, 2 * MiB], [size - MiB, MiB]] as const) {
      const data = pattern(offset, length);
      await client.write(offset, data);
      data.copy(content, offset);
    }
    await client.close();
    await hangar.unplug(volume.uri, "d1");
    return { volume, content };
  }

  function socketPath(): string {
    return join(hangar.root, `target-${serial++}.sock`);
  }

  async function startNbdkit(t: TestContext, args: string[]): Promise<{ uri: string; stop(): Promise<void> }> {
    const socket = socketPath();
    const nbdkit = startProcess((fn) => t.after(fn), "nbdkit", ["--unix", socket, "--foreground", ...args]);
    await waitForSocket(socket);
    const exited = new Promise((resolve) => nbdkit.once("exit", resolve));
    return {
      uri: `nbd+unix:///?socket=${socket}`,
      async stop() {
        nbdkit.kill("SIGTERM");
        await exited;
      },
    };
  }

  async function waitForNoDaemon(uri: string): Promise<void> {
    for (let waited = 0; hangar.daemonPid(uri) !== undefined && waited < 10_000; waited += 100) await sleep(100);
    assert.equal(hangar.daemonPid(uri), undefined, "the volume's daemon is gone");
  }

  const whole = (volume: TestVolume) => ({ blocksize: 65536, ranges: [[0, volume.size / 65536] as [number, number]] });

  test("copies a detached volume to qemu-nbd: identical bytes, holes zeroed, progress up to 1", async (t) => {
    const { volume, content } = await filledVolume(32 * MiB);
    const file = join(hangar.root, "qemu-target.raw");
    await writeFile(file, Buffer.alloc(volume.size, 0xaa)); // not pre-zeroed: holes must be written
    const socket = socketPath();
    const qemu = startProcess((fn) => t.after(fn), "qemu-nbd", [`--socket=${socket}`, "--format=raw", "--persistent", "--shared=4", file]);
    await waitForSocket(socket);

    const operation = await hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote: `nbd+unix:///?socket=${socket}`, blocklist: whole(volume) });
    assert.equal(operation[0], "CopyV1");
    const seen: number[] = [];
    let status = await hangar.nbd.call("Data.stat", { dbg, operation });
    while (!status.complete) {
      seen.push(status.progress ?? -1);
      await sleep(50);
      status = await hangar.nbd.call("Data.stat", { dbg, operation });
    }
    assert.deepEqual(status, { failed: false, complete: true, progress: 1 });
    assert.ok(seen.every((p) => p >= 0 && p <= 1), `progress outside 0..1: ${seen.join(", ")}`);

    qemu.kill("SIGTERM");
    await new Promise((resolve) => qemu.once("exit", resolve));
    assert.ok((await readFile(file)).equals(content), "the target holds the volume's bytes");

    // The daemon started for a detached volume leaves once the copy is done.
    await waitForNoDaemon(volume.uri);
    assert.ok((await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[1] === operation[1]));
    await hangar.nbd.call("Data.destroy", { dbg, operation });
    assert.ok(!(await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[1] === operation[1]));
  });

  test("copies only the listed blocks of an attached volume to nbdkit", async (t) => {
    const { volume, content } = await filledVolume(16 * MiB);
    const { uri: remote } = await startNbdkit(t, ["memory", "16M"]);
    const target = await NbdClient.connect(remote);
    t.after(() => target.close());
    await target.write(0, Buffer.alloc(volume.size, 0x55));
    await hangar.plug(volume.uri, "d1");

    // Blocks of 1 MiB: 1-2 (data then hole), 8 (hole), 15 (data); [2, 1] overlaps [1, 2].
    const blocklist = { blocksize: MiB, ranges: [[1, 2], [8, 1], [15, 1], [2, 1]] as [number, number][] };
    const operation = await hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote, blocklist });
    assert.deepEqual(await hangar.waitComplete(operation), { failed: false, complete: true, progress: 1 });

    const after = await target.read(0, volume.size);
    for (let block = 0; block < 16; block++) {
      const listed = [1, 2, 8, 15].includes(block);
      const expected = listed ? content.subarray(block * MiB, (block + 1) * MiB) : Buffer.alloc(MiB, 0x55);
      assert.ok(after.subarray(block * MiB, (block + 1) * MiB).equals(expected), `block ${block} (${listed ? "listed" : "not listed"})`);
    }
    await hangar.nbd.call("Data.destroy", { dbg, operation });
    await hangar.unplug(volume.uri, "d1");
  });

  test("Data.destroy is refused while a copy runs; Data.cancel ends it failed; Data.ls follows", async (t) => {
    const { volume } = await filledVolume(16 * MiB);
    // 2 Mbit/s: the copy of 4 MiB of data would take 16 s.
    const slow = await startNbdkit(t, ["--filter=rate", "memory", "16M", "rate=2M"]);
    const remote = slow.uri;
    const operation = await hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote, blocklist: whole(volume) });
    const status = await hangar.nbd.call("Data.stat", { dbg, operation });
    assert.equal(status.complete, false);
    assert.ok(status.progress !== undefined && status.progress >= 0 && status.progress < 1);
    assert.ok((await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[0] === "CopyV1" && op[1] === operation[1]));
    await assert.rejects(hangar.nbd.call("Data.destroy", { dbg, operation }), /still in progress/);

    await hangar.nbd.call("Data.cancel", { dbg, operation });
    const cancelled = await hangar.waitComplete(operation);
    assert.equal(cancelled.failed, true);
    assert.ok((cancelled.progress ?? 1) < 1);
    await hangar.nbd.call("Data.cancel", { dbg, operation }); // of a finished operation: nothing to do
    await hangar.nbd.call("Data.destroy", { dbg, operation });
    assert.ok(!(await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[1] === operation[1]));
    await assert.rejects(hangar.nbd.call("Data.stat", { dbg, operation }), /no operation/);
    // Requests already sent finish (or fail) before the daemon lets go of the volume.
    await slow.stop();
    await waitForNoDaemon(volume.uri);
  });

  test("a daemon killed mid-copy: Data.stat reports the copy failed, never done", async (t) => {
    const { volume } = await filledVolume(16 * MiB);
    const { uri: remote } = await startNbdkit(t, ["--filter=rate", "memory", "16M", "rate=2M"]);
    const operation: Operation = await hangar.nbd.call("Data.copy", { dbg, uri: volume.uri, domain: "d1", remote, blocklist: whole(volume) });
    const pid = hangar.daemonPid(volume.uri);
    assert.ok(pid !== undefined);
    process.kill(pid, "SIGKILL");
    await waitForNoDaemon(volume.uri);

    const status = await hangar.nbd.call("Data.stat", { dbg, operation });
    assert.equal(status.complete, true);
    assert.equal(status.failed, true);
    assert.ok((status.progress ?? 1) < 1);
    assert.deepEqual(await hangar.nbd.call("Data.stat", { dbg, operation }), status, "the verdict is kept");
    await hangar.nbd.call("Data.destroy", { dbg, operation });

    // The volume is usable again: a new daemon serves it.
    await hangar.plug(volume.uri, "d1", { readonly: true });
    await hangar.unplug(volume.uri, "d1");
    assert.deepEqual(hangar.daemonPids(), []);
    assert.deepEqual(hangar.socketFiles(), []);
  });
});
