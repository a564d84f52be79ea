// The remote end of Data.copy and Data.mirror: our NBD server exporting a raw file of the suite's own on a
// unix socket, read back with fs to see what the plugin sent.
import { open, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { ExportBackend } from "../nbd/backend.ts";
import { openRawFileBackend } from "../nbd/raw-file-backend.ts";
import { NbdServer } from "../nbd/server.ts";

export interface NbdTarget {
  /** `nbd+unix:///export?socket=PATH`: what Data.copy and Data.mirror get as `remote`. */
  readonly uri: string;
  read(offset: number, length: number): Promise<Buffer>;
  close(): Promise<void>;
}

const EXPORT_NAME = "export";

/** Serves a zero-filled file of `size` bytes in `dir`; `name` keeps several targets of a run apart. */
export async function startNbdTarget(dir: string, name: string, size: number): Promise<NbdTarget> {
  const file = join(dir, `${name}.raw`);
  const socketPath = join(dir, `${name}.sock`);
  await writeFile(file, "");
  await truncate(file, size);
  const backend: ExportBackend = await openRawFileBackend(file, { readOnly: false });
  const server = new NbdServer();
  server.addExport(EXPORT_NAME, backend);
  try {
    await server.listen({ socketPath });
  } catch (error) {
    await backend.close();
    throw error;
  }
  return {
    uri: `nbd+unix:///${EXPORT_NAME}?socket=${socketPath}`,
    async read(offset, length) {
      const handle = await open(file, "r");
      try {
        const target = Buffer.alloc(length);
        await handle.read(target, 0, length, offset);
        return target;
      } finally {
        await handle.close();
      }
    },
    async close() {
      await server.close();
      await backend.close();
    },
  };
}
