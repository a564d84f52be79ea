// Data.mirror through the real plugin client: writes through our export reach a real NBD server, and the
// mirroring procedure (mirror, then copy while the VM keeps writing) leaves the target identical.
import assert from "node:assert/strict";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";
import { NbdClient } from "../../../nbd/client.ts";
import { startProcess, waitForSocket } from "../../../nbd/testing.ts";
import { dbg, MiB, pattern, TestHangar } from "./test-support.ts";

describe("Data.mirror", () => {
  let hangar: TestHangar;

  before(async () => {
    hangar = await TestHangar.start();
  });
  after(() => hangar.stop());

  async function startNbdkit(t: TestContext, name: string, size: number): Promise<string> {
    const socket = join(hangar.root, `${name}.sock`);
    startProcess((fn) => t.after(fn), "nbdkit", ["--unix", socket, "--foreground", "memory", String(size)]);
    await waitForSocket(socket);
    return `nbd+unix:///?socket=${socket}`;
  }

  test("writes, zeroes and trims through the export reach the target until Data.cancel", async (t) => {
    const volume = await hangar.createVolume(8 * MiB);
    const client = await NbdClient.connect(await hangar.plug(volume.uri, "d1"));
    t.after(() => client.close());
    await client.write(0, pattern(1, 2 * MiB)); // before the mirror: not sent
    const remote = await startNbdkit(t, "mirror", volume.size);
    const target = await NbdClient.connect(remote);
    t.after(() => target.close());
    await target.write(0, Buffer.alloc(volume.size, 0x55));

    const operation = await hangar.nbd.call("Data.mirror", { dbg, uri: volume.uri, domain: "d1", remote });
    assert.equal(operation[0], "MirrorV1");
    assert.deepEqual(await hangar.nbd.call("Data.stat", { dbg, operation }), { failed: false, complete: false });
    assert.ok((await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[0] === "MirrorV1" && op[1] === operation[1]));
    await assert.rejects(hangar.nbd.call("Data.destroy", { dbg, operation }), /still in progress/);

    await client.write(3 * MiB + 100, pattern(2, 5000));
    await client.write(5 * MiB, pattern(3, MiB));
    await client.writeZeroes(MiB, 128 * 1024);
    await client.trim(5 * MiB + 64 * 1024, 3 * 64 * 1024 + 1000); // whole 64 KiB clusters are dropped, the tail is not
    await client.flush();
    const mirrored = [
      [3 * MiB + 100, 5000],
      [5 * MiB, MiB],
      [MiB, 128 * 1024],
    ] as const;
    for (const [offset, length] of mirrored) {
      assert.ok((await target.read(offset, length)).equals(await client.read(offset, length)), `mirrored range at ${offset}`);
    }
    assert.ok((await target.read(0, 64 * 1024)).equals(Buffer.alloc(64 * 1024, 0x55)), "writes before Data.mirror are the copy's job");

    await hangar.nbd.call("Data.cancel", { dbg, operation });
    assert.deepEqual(await hangar.waitComplete(operation), { failed: true, complete: true });
    await client.write(7 * MiB, pattern(4, 4096));
    assert.ok((await target.read(7 * MiB, 4096)).equals(Buffer.alloc(4096, 0x55)), "no write reaches the target after Data.cancel");
    await hangar.nbd.call("Data.destroy", { dbg, operation });
    assert.ok(!(await hangar.nbd.call("Data.ls", { dbg })).some((op) => op[1] === operation[1]));
    await client.close();
    await hangar.unplug(volume.uri, "d1");
  });

  test("mirror, then copy while the VM writes: the target ends identical to the volume", async (t) => {
    const size = 64 * MiB;
    const volume = await hangar.createVolume(size);
    const client = await NbdClient.connect(await hangar.plug(volume.uri, "vm"));
    t.after(() => client.close());
    for (let offset = 0; offset < size; offset += 8 * MiB) await client.write(offset, pattern(offset, 5 * MiB)); // 5 of every 8 MiB
    const file = join(hangar.root, "mirror-target.raw");
    await writeFile(file, Buffer.alloc(size, 0xaa)); // not zeroed: the copy must write everything
    const socket = join(hangar.root, "qemu.sock");
    const qemu = startProcess((fn) => t.after(fn), "qemu-nbd", [`--socket=${socket}`, "--format=raw", "--persistent", "--shared=4", file]);
    await waitForSocket(socket);
    const remote = `nbd+unix:///?socket=${socket}`;

    // The toolstack's order: Data.mirror, then Data.copy of every block, polling Data.stat.
    const mirror = await hangar.nbd.call("Data.mirror", { dbg, uri: volume.uri, domain: "vm", remote });
    let writing = true;
    let writes = 0;
    const random = lcg(42);
    const writer = (async () => {
      while (writing) {
        const batch = Array.from({ length: 8 }, () => {
          const length = 512 * (1 + Math.floor(random() * 512));
          const offset = 512 * Math.floor(random() * ((size - length) / 512));
          writes++;
          return random() < 0.1 ? client.writeZeroes(offset, length) : client.write(offset, pattern(writes, length));
        });
        await Promise.all(batch);
      }
    })();
    const copy = await hangar.nbd.call("Data.copy", {
      dbg,
      uri: volume.uri,
      domain: "vm",
      remote,
      blocklist: { blocksize: 2 * MiB, ranges: [[0, size / (2 * MiB)]] },
    });
    const copied = await hangar.waitComplete(copy);
    const writesDuringCopy = writes;
    writing = false;
    await writer;
    await client.flush();
    assert.deepEqual(copied, { failed: false, complete: true, progress: 1 });
    assert.ok(writesDuringCopy > 50, `only ${writesDuringCopy} writes raced the copy`);
    assert.deepEqual(await hangar.nbd.call("Data.stat", { dbg, operation: mirror }), { failed: false, complete: false });

    // The mirror ends, successfully, when the datapath stops serving.
    await client.close();
    await hangar.unplug(volume.uri, "vm");
    assert.deepEqual(await hangar.nbd.call("Data.stat", { dbg, operation: mirror }), { failed: false, complete: true });
    qemu.kill("SIGTERM");
    await new Promise((resolve) => qemu.once("exit", resolve));

    const reader = await NbdClient.connect(await hangar.plug(volume.uri, "vm", { readonly: true }));
    const target = await readFile(file);
    for (let offset = 0; offset < size; offset += 4 * MiB) {
      assert.ok(target.subarray(offset, offset + 4 * MiB).equals(await reader.read(offset, 4 * MiB)), `the target differs in the 4 MiB at ${offset}`);
    }
    await reader.close();
    await hangar.unplug(volume.uri, "vm");
    for (const operation of [mirror, copy]) await hangar.nbd.call("Data.destroy", { dbg, operation });
  });
});

/** Deterministic pseudo-random numbers in [0, 1). */
function lcg(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}
