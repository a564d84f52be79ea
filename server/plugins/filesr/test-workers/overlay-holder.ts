// Test worker: opens a volume with a non-persistent overlay, writes to it, then waits to be killed.
import { openVolumeData } from "../volume-data.ts";

const [srPath, key] = process.argv.slice(2) as [string, string];
const volume = await openVolumeData(srPath, key, { overlay: true });
await volume.write(0, Buffer.from("scratch data"));
process.stdout.write("ready\n");
setInterval(() => undefined, 1000);
