// A child process serving one export with OUR NBD server, the way qemu-nbd serves a file: started by the
// bench, prints "ready" once listening, serves until SIGTERM. Usage:
//   serve-export.ts <socket> raw <file> [ro|rw]
//   serve-export.ts <socket> volume <sr dir> <key> [ro|rw]
import { openRawFileBackend } from "../../server/nbd/raw-file-backend.ts";
import type { ExportBackend } from "../../server/nbd/backend.ts";
import { NbdServer } from "../../server/nbd/server.ts";
import { openVolumeData } from "../../server/plugins/filesr/index.ts";

const [socketPath, kind, ...rest] = process.argv.slice(2);

async function openBackend(): Promise<ExportBackend> {
  if (kind === "raw" && rest[0] !== undefined) return openRawFileBackend(rest[0], { readOnly: rest[1] === "ro" });
  if (kind === "volume" && rest[0] !== undefined && rest[1] !== undefined) {
    return openVolumeData(rest[0], rest[1], { readOnly: rest[2] === "ro" });
  }
  throw new Error("usage: serve-export.ts <socket> raw <file> [ro|rw] | volume <sr dir> <key> [ro|rw]");
}

if (socketPath === undefined) throw new Error("socket path missing");
const backend = await openBackend();
const server = new NbdServer();
server.addExport("", backend);
await server.listen({ socketPath });
process.stdout.write("ready\n");
process.once("SIGTERM", () => {
  void server
    .close()
    .then(() => backend.close())
    .finally(() => process.exit(0));
});
