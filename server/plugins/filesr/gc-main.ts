// Entry point of the background collector started by startGarbageCollector: node gc-main.ts <sr path>
import { collectGarbage } from "./gc.ts";

const srPath = process.argv[2];
if (!srPath) {
  process.stderr.write("usage: gc-main.ts <sr path>\n");
  process.exit(2);
}
await collectGarbage(srPath);
