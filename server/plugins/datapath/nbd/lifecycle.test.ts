// The nbd datapath through the real plugin client: the open → attach → activate → deactivate → detach →
// close cycle, what the data does across it (also across snapshots), and that nothing (daemon, socket)
// outlives Datapath.close.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { appendFileSync, existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { NbdClient } from "../../../nbd/client.ts";
import { daemonName } from "./paths.ts";
import { dbg, MiB, pattern, TestHangar } from "./test-support.ts";

describe("nbd datapath lifecycle", () => {
  let hangar: TestHangar;

  before(async () => {
    hangar = await TestHangar.start();
  });
  after(() => hangar.stop());

  const assertNothingLeft = () => {
    assert.deepEqual(hangar.daemonPids(), [], "no volume daemon may outlive Datapath.close");
    assert.deepEqual(hangar.socketFiles(), [], "no socket file may outlive Datapath.close");
  };

  test("Plugin.Query declares the datapath's features", async () => {
    const query = await hangar.nbd.call("Plugin.query", { dbg });
    assert.equal(query.plugin, "nbd");
    assert.deepEqual(query.features, ["NONPERSISTENT", "VDI_ACTIVATE_READONLY", "VDI_MIRROR_IN", "VDI_MIRROR"]);
  });

  test("data written through NBD reads back after close and a new open", async () => {
    const volume = await hangar.createVolume(16 * MiB);
    const first = pattern(1, MiB);
    const unaligned = pattern(2, 5000);
    const nbdUri = await hangar.plug(volume.uri, "d1");
    assert.match(nbdUri, /^nbd:unix:\/.+\.sock:exportname=/);
    // A fresh bundle (npm test builds it) starts the bundled daemon, not the sources.
    assert.deepEqual(hangar.daemonPids().map((pid) => /\/\.bundle\/[^/]+\/daemon\.mjs\0/.test(readFileSync(`/proc/${pid}/cmdline`, "latin1"))), [true]);
    const writer = await NbdClient.connect(nbdUri);
    assert.equal(writer.size, volume.size);
    assert.equal(writer.readOnly, false);
    await writer.write(0, first);
    await writer.write(15 * MiB + 1000, unaligned);
    await writer.flush();
    await writer.close();
    await hangar.unplug(volume.uri, "d1");
    assertNothingLeft();

    const reader = await NbdClient.connect(await hangar.plug(volume.uri, "d1", { readonly: true }));
    assert.ok((await reader.read(0, MiB)).equals(first));
    assert.ok((await reader.read(15 * MiB + 1000, 5000)).equals(unaligned));
    assert.ok((await reader.read(4 * MiB, MiB)).equals(Buffer.alloc(MiB)), "never written: zeros");
    await reader.close();
    await hangar.unplug(volume.uri, "d1");
    assertNothingLeft();
  });

  test("attach, activate, deactivate and detach are idempotent; writes need a read-write activation", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const { uri } = volume;
    await hangar.nbd.call("Datapath.open", { dbg, uri, persistent: true });
    await hangar.nbd.call("Datapath.open", { dbg, uri, persistent: true });
    const attached = await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "d1" });
    assert.deepEqual(await hangar.nbd.call("Datapath.attach", { dbg, uri, domain: "d1" }), attached);
    const nbd = attached.implementations[0];
    assert.ok(nbd !== undefined && nbd[0] === "Nbd");

    const early = await NbdClient.connect(nbd[1].uri);
    assert.equal(early.readOnly, true, "attached but not activated: the export is read-only");
    await early.close();

    await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "d1" });
    await hangar.nbd.call("Datapath.activate", { dbg, uri, domain: "d1" });
    const client = await NbdClient.connect(nbd[1].uri);
    assert.equal(client.readOnly, false);
    await client.write(MiB, pattern(3, 64 * 1024));

    await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain: "d1" });
    await hangar.nbd.call("Datapath.deactivate", { dbg, uri, domain: "d1" });
    // The connection made while read-write stays open, but the server now refuses its writes.
    await assert.rejects(client.write(0, Buffer.alloc(4096, 1)), (error: Error & { errno?: string }) => error.errno === "EPERM");
    assert.ok((await client.read(MiB, 64 * 1024)).equals(pattern(3, 64 * 1024)), "deactivate flushed the write; reads go on");
    await client.close();

    await hangar.nbd.call("Datapath.detach", { dbg, uri, domain: "d1" });
    await hangar.nbd.call("Datapath.detach", { dbg, uri, domain: "d1" });
    assert.deepEqual(hangar.daemonPids(), [], "the last detach stops the daemon");
    await hangar.nbd.call("Datapath.close", { dbg, uri });
    await hangar.nbd.call("Datapath.close", { dbg, uri });
    assertNothingLeft();
  });

  test("a non-persistent open keeps its writes until close, then they are gone", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const kept = pattern(4, MiB);
    const scratch = pattern(5, MiB);
    let client = await NbdClient.connect(await hangar.plug(volume.uri, "d1"));
    await client.write(0, kept);
    await client.close();
    await hangar.unplug(volume.uri, "d1");

    client = await NbdClient.connect(await hangar.plug(volume.uri, "d1", { persistent: false }));
    await client.write(0, scratch);
    assert.ok((await client.read(0, MiB)).equals(scratch));
    await client.close();
    // Detach and attach again without a close: the overlay is still there.
    await hangar.nbd.call("Datapath.deactivate", { dbg, uri: volume.uri, domain: "d1" });
    await hangar.nbd.call("Datapath.detach", { dbg, uri: volume.uri, domain: "d1" });
    const { implementations } = await hangar.nbd.call("Datapath.attach", { dbg, uri: volume.uri, domain: "d1" });
    const again = implementations[0];
    assert.ok(again !== undefined && again[0] === "Nbd");
    client = await NbdClient.connect(again[1].uri);
    assert.ok((await client.read(0, MiB)).equals(scratch), "non-persistent writes last until close");
    await client.close();
    await hangar.nbd.call("Datapath.detach", { dbg, uri: volume.uri, domain: "d1" });
    await hangar.nbd.call("Datapath.close", { dbg, uri: volume.uri });
    assertNothingLeft();

    client = await NbdClient.connect(await hangar.plug(volume.uri, "d1", { readonly: true }));
    assert.ok((await client.read(0, MiB)).equals(kept), "after close the volume holds what it held before");
    await client.close();
    await hangar.unplug(volume.uri, "d1");
    assertNothingLeft();
  });


  test("a volume with data in three layers reads correctly through NBD", async () => {
    const volume = await hangar.createVolume(8 * MiB);
    const expected = Buffer.alloc(volume.size);
    const client = await NbdClient.connect(await hangar.plug(volume.uri, "d1"));
    const write = async (offset: number, data: Buffer) => {
      await client.write(offset, data);
      data.copy(expected, offset);
    };
    const snapshot = async () => {
      await client.flush();
      const taken = await hangar.volumes.call("Volume.snapshot", { dbg, sr: hangar.sr, key: volume.key });
      return { uri: taken.uri.find((u) => u.startsWith("nbd:")) ?? "", content: Buffer.from(expected) };
    };
    await write(0, pattern(10, 2 * MiB));
    await write(6 * MiB, pattern(11, MiB));
    await snapshot();
    await write(MiB + 12345, pattern(12, MiB + 7));
    await write(4 * MiB, pattern(13, 100_000));
    const second = await snapshot();
    await write(500, pattern(14, 3000));
    await write(6 * MiB + 65536, pattern(15, 65536));
    assert.ok((await client.read(0, volume.size)).equals(expected), "through the live export");
    await client.close();
    await hangar.unplug(volume.uri, "d1");

    // A snapshot is a read-only volume: even a read-write activation serves it read-only.
    const frozen = await NbdClient.connect(await hangar.plug(second.uri, "d2"));
    assert.equal(frozen.readOnly, true);
    assert.ok((await frozen.read(0, volume.size)).equals(second.content), "the snapshot between the second and third writes");
    await frozen.close();
    await hangar.unplug(second.uri, "d2");

    const reader = await NbdClient.connect(await hangar.plug(volume.uri, "d1", { readonly: true }));
    assert.ok((await reader.read(0, volume.size)).equals(expected), "after a new open");
    await reader.close();
    await hangar.unplug(volume.uri, "d1");
    assertNothingLeft();
  });

  test("a volume daemon's log: a new one once past 1 MiB when a daemon starts (the last kept as .1), both removed with the volume", async () => {
    const volume = await hangar.createVolume(4 * MiB);
    const log = join(hangar.host.HANGAR_RUN_DIR, "daemons", `${daemonName(volume.uri)}.log`);
    await hangar.plug(volume.uri, "d1");
    await hangar.unplug(volume.uri, "d1");
    assert.match(readFileSync(log, "utf8"), /serving/);
    // As if grown over many runs.
    appendFileSync(log, "x".repeat(2 * MiB));
    await hangar.plug(volume.uri, "d1");
    await hangar.unplug(volume.uri, "d1");
    assert.ok(statSync(log).size < 64 * 1024, `a fresh log (${statSync(log).size} bytes)`);
    assert.ok(statSync(`${log}.1`).size > 2 * MiB, "the previous log kept once");
    await hangar.volumes.call("Volume.destroy", { dbg, sr: hangar.sr, key: volume.key });
    assert.deepEqual([existsSync(log), existsSync(`${log}.1`)], [false, false], "the logs go with the volume");
  });
});
