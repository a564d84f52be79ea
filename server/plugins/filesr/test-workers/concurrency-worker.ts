// Test worker for concurrency.test.ts: random operations for a while, plus contention on one shared volume
// (writes that may find it busy, live snapshots of it); then checks its own volumes against its model.
import { snapshotVolume } from "../volumes.ts";
import { openVolumeData } from "../volume-data.ts";
import { FileSrError } from "../errors.ts";
import { RandomOps, bytes } from "./random-ops.ts";

const [srPath, prefix, seedText, sharedKey, durationText] = process.argv.slice(2) as [string, string, string, string, string];
const ops = new RandomOps(srPath, prefix, Number(seedText));
const deadline = Date.now() + Number(durationText);
let busy = 0;
let sharedWrites = 0;
let sharedSnapshots = 0;
while (Date.now() < deadline) {
  const roll = ops.next(10);
  if (roll === 0) {
    try {
      const shared = await openVolumeData(srPath, sharedKey);
      for (let i = 0; i < 20; i++) await shared.write(ops.next(64) * 65536, bytes(ops.next(1e9), 65536));
      await shared.close();
      sharedWrites++;
    } catch (error) {
      if (!(error instanceof FileSrError && error.code === "volume_in_use")) throw error;
      busy++;
    }
  } else if (roll === 1) {
    await snapshotVolume(srPath, sharedKey);
    sharedSnapshots++;
  } else {
    await ops.step();
  }
}
const wrong = await ops.verify();
process.stdout.write(JSON.stringify({ counts: ops.counts, busy, sharedWrites, sharedSnapshots, wrong }) + "\n");
process.exit(wrong.length === 0 ? 0 : 1);
