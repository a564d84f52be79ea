// Real NBD clients reading a volume through the export Datapath.attach hands out: libnbd's nbdinfo sees the
// holes, qemu-img convert and nbdcopy read the same bytes as we wrote.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { NbdClient } from "../../../nbd/client.ts";
import { run } from "../../../nbd/testing.ts";
import { parseNbdUri } from "../../../nbd/uri.ts";
import { MiB, pattern, TestHangar, type TestVolume } from "./test-support.ts";

describe("nbd datapath export with real NBD clients", () => {
  let hangar: TestHangar;
  let volume: TestVolume;
  let content: Buffer;
  /** The export as libnbd and qemu spell it. */
  let uri: string;

  before(async () => {
    hangar = await TestHangar.start();
    volume = await hangar.createVolume(16 * MiB);
    content = Buffer.alloc(volume.size);
    const writer = await NbdClient.connect(await hangar.plug(volume.uri, "d1"));
    for (const offset of [0, 5 * MiB, 15 * MiB]) {
      const data = pattern(offset, MiB);
      await writer.write(offset, data);
      data.copy(content, offset);
    }
    await writer.close();
    await hangar.nbd.call("Datapath.deactivate", { dbg: "interop", uri: volume.uri, domain: "d1" });
    await hangar.nbd.call("Datapath.activate_readonly", { dbg: "interop", uri: volume.uri, domain: "d1" });
    const { implementations } = await hangar.nbd.call("Datapath.attach", { dbg: "interop", uri: volume.uri, domain: "d1" });
    const nbd = implementations[0];
    assert.ok(nbd !== undefined && nbd[0] === "Nbd");
    const target = parseNbdUri(nbd[1].uri);
    assert.equal(target.kind, "unix");
    uri = `nbd+unix:///${target.exportName}?socket=${target.kind === "unix" ? target.socketPath : ""}`;
  });

  after(async () => {
    await hangar.unplug(volume.uri, "d1");
    await hangar.stop();
  });

  test("nbdinfo --map shows data where we wrote and holes elsewhere", async () => {
    const map = (await run("nbdinfo", ["--map", "--json", uri])) as string;
    const extents = (JSON.parse(map) as Array<{ offset: number; length: number; type: number }>).map((e) => [e.offset, e.length, e.type]);
    assert.deepEqual(extents, [
      [0, MiB, 0],
      [MiB, 4 * MiB, 3],
      [5 * MiB, MiB, 0],
      [6 * MiB, 9 * MiB, 3],
      [15 * MiB, MiB, 0],
    ]);
  });

  test("qemu-img convert reads the same bytes", async () => {
    const out = join(hangar.root, "qemu-img.raw");
    await run("qemu-img", ["convert", "-f", "raw", "-O", "raw", uri, out]);
    assert.ok((await readFile(out)).equals(content));
  });

  test("nbdcopy reads the same bytes", async () => {
    const out = join(hangar.root, "nbdcopy.raw");
    await run("nbdcopy", [uri, out]);
    assert.ok((await readFile(out)).equals(content));
  });
});
