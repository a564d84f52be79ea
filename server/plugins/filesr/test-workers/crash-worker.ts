// Test worker for crash.test.ts: random operations until killed. Also keeps a journal volume: record i
// is written at byte i*4096 and flushed, then "flushed <i>" is printed; everything printed must survive.
import { createVolume } from "../volumes.ts";
import { openVolumeData } from "../volume-data.ts";
import { RandomOps, bytes } from "./random-ops.ts";

const [srPath, seedText] = process.argv.slice(2) as [string, string];
const seed = Number(seedText);
const ops = new RandomOps(srPath, "w", seed);
const journal = await createVolume(srPath, { name: "journal", description: "", size: 1024 * 1024 });
process.stdout.write(`journal ${journal.key}\n`);
let record = 0;
for (;;) {
  if (ops.next(4) === 0 && record < 256) {
    const volume = await openVolumeData(srPath, journal.key);
    await volume.write(record * 4096, bytes(seed * 1000 + record, 4096));
    await volume.flush();
    process.stdout.write(`flushed ${record}\n`);
    await volume.close();
    record++;
  } else {
    await ops.step();
  }
}
