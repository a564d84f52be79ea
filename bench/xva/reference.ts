// A reference for the uncompressed export: the saved export served from a file by a bare Node HTTP server (in
// the bench process, which is idle meanwhile) to the same curl command. What Node's HTTP streaming alone
// costs on this machine, without the datapath, NBD, tar or checksums: a floor that `cat` is not.
import { createReadStream } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { MiB, timeSeconds } from "../measure.ts";
import { runCommand } from "../processes.ts";

/** Wall seconds of `curl -o /dev/null` fetching `path`, and the server's CPU seconds. */
export async function serveFileOnce(path: string): Promise<{ seconds: number; cpu: number }> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "application/octet-stream" });
    createReadStream(path, { highWaterMark: MiB }).pipe(response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const cpu = process.cpuUsage();
    const seconds = await timeSeconds(() => runCommand("curl", ["-sS", "-f", "-o", "/dev/null", `http://127.0.0.1:${port}/export.xva`], { timeoutMs: 15 * 60_000 }));
    const used = process.cpuUsage(cpu);
    return { seconds, cpu: (used.user + used.system) / 1e6 };
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}
