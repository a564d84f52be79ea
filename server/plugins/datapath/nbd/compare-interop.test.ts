// Volume.compare after real NBD writers filled a volume through the export Datapath.attach hands out:
// qemu-img convert -n and nbdcopy send the image's zero regions as NBD_CMD_WRITE_ZEROES, which the file SR
// records as zeroed clusters; compare against the snapshot taken before must list the data only.
import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { run } from "../../../nbd/testing.ts";
import { parseNbdUri } from "../../../nbd/uri.ts";
import { dbg, MiB, pattern, TestHangar } from "./test-support.ts";

const SIZE = 64 * MiB;
/** The image: 8 MiB of data, 40 MiB of zeros, 16 MiB of data; in 64 KiB blocks, [start, length] of the data. */
const DATA_BLOCKS = [
  [0, 128],
  [768, 256],
];

describe("Volume.compare after qemu-img and nbdcopy wrote an image with zeros", () => {
  let hangar: TestHangar;
  let image: string;

  before(async () => {
    hangar = await TestHangar.start();
    const content = Buffer.alloc(SIZE);
    pattern(1, 8 * MiB).copy(content, 0);
    pattern(2, 16 * MiB).copy(content, 48 * MiB);
    image = join(hangar.root, "image.raw");
    await writeFile(image, content); // zeros written out, not holes: the writers must find them
  });

  after(() => hangar.stop());

  const writers: Array<[string, (uri: string) => [string, string[]]]> = [
    ["qemu-img convert -n", (uri) => ["qemu-img", ["convert", "-n", "-f", "raw", "-O", "raw", image, uri]]],
    // Without --destination-is-zero (or --allocated) nbdcopy zeroes the zero runs with NBD_CMD_WRITE_ZEROES.
    ["nbdcopy", (uri) => ["nbdcopy", [image, uri]]],
  ];

  for (const [name, command] of writers) {
    test(`${name}: compare with the snapshot lists the 24 MiB of data, not the 40 MiB of zeros`, async () => {
      const volume = await hangar.createVolume(SIZE);
      const snapshot = await hangar.volumes.call("Volume.snapshot", { dbg, sr: hangar.sr, key: volume.key });
      const target = parseNbdUri(await hangar.plug(volume.uri, "d1"));
      assert.equal(target.kind, "unix");
      const uri = `nbd+unix:///${target.exportName}?socket=${target.kind === "unix" ? target.socketPath : ""}`;
      try {
        await run(...command(uri));
        await run("qemu-img", ["compare", "-f", "raw", "-F", "raw", image, uri]);
      } finally {
        await hangar.unplug(volume.uri, "d1");
      }
      const expected = { blocksize: 65536, ranges: DATA_BLOCKS };
      assert.deepEqual(await hangar.volumes.call("Volume.compare", { dbg, sr: hangar.sr, key: volume.key, key2: snapshot.key }), expected);
      assert.deepEqual(await hangar.volumes.call("Volume.compare", { dbg, sr: hangar.sr, key: snapshot.key, key2: volume.key }), expected);
      // Zeros sent as data would have been allocated: only the data is.
      const { physical_utilisation } = await hangar.volumes.call("Volume.stat", { dbg, sr: hangar.sr, key: volume.key });
      assert.equal(physical_utilisation, 24 * MiB);
    });
  }
});
