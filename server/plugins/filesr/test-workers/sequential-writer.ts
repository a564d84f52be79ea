// Test worker: writes blocks 0..n-1 of a volume in order (block i starts with the u32 i+1), one at a time,
// then closes the volume — or, with "hold", keeps it open until killed.
import { openVolumeData } from "../volume-data.ts";
import { CLUSTER_SIZE } from "../layout.ts";

const [srPath, key, count, mode] = process.argv.slice(2) as [string, string, string, string | undefined];
const volume = await openVolumeData(srPath, key);
process.stdout.write("ready\n");
for (let block = 0; block < Number(count); block++) {
  const data = Buffer.alloc(CLUSTER_SIZE, 0xab);
  data.writeUInt32LE(block + 1, 0);
  await volume.write(block * CLUSTER_SIZE, data);
  if (block % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
}
if (mode === "hold") setInterval(() => undefined, 1000);
else await volume.close();
