// Entry point of the datasource daemon: node datasource-daemon-main.ts <sr path> [dir] [interval ms]
import { defaultMetricsDir, runDatasourceDaemon } from "./datasources.ts";

const [srPath, dir, interval] = process.argv.slice(2);
if (!srPath) {
  process.stderr.write("usage: datasource-daemon-main.ts <sr path> [metrics dir] [interval ms]\n");
  process.exit(2);
}
await runDatasourceDaemon(srPath, dir || defaultMetricsDir(), interval ? Number(interval) : 5000);
