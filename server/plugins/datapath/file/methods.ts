// The `file` datapath: hands a volume to a VM as a plain raw file (`File` implementation). A layered volume
// is first made self-contained (filesr.materializeFlatFile); a non-persistent open gets a private sparse
// copy that close throws away.
import { mkdirSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { hostUuid } from "../../../config.ts";
import { STATE_ZERO } from "../../../nbd/backend.ts";
import * as filesr from "../../filesr/index.ts";
import { INFO } from "./query.ts";
import { createDatapathPlugin, type VolumeRef } from "../../runtime/datapath-plugin.ts";
import { datapathDir, recordId } from "../../runtime/datapath-state.ts";

const COPY_CHUNK = 8 * 1024 * 1024;

/** Copies the allocated data of a volume into a new sparse file: holes stay holes. */
async function sparseCopy(volume: VolumeRef, target: string): Promise<void> {
  const source = await filesr.openVolumeData(volume.srPath, volume.key, { readOnly: true, host: hostUuid() });
  const out = await open(target, "w");
  try {
    await out.truncate(source.size);
    const buffer = Buffer.allocUnsafe(COPY_CHUNK);
    for (let offset = 0; offset < source.size; ) {
      const extents = await source.blockStatus(offset, Math.min(source.size - offset, 1 << 30));
      for (const extent of extents) {
        const end = Math.min(offset + extent.length, source.size);
        if ((extent.flags & STATE_ZERO) === 0) {
          for (let at = offset; at < end; at += COPY_CHUNK) {
            const chunk = buffer.subarray(0, Math.min(COPY_CHUNK, end - at));
            await source.read(at, chunk);
            await out.write(chunk, 0, chunk.length, at);
          }
        }
        offset = end;
      }
    }
    await out.sync();
  } finally {
    await out.close();
    await source.close();
  }
}

export const methods = createDatapathPlugin(
  INFO,
  {
    async attach(volume, record) {
      if (record.extra.path === undefined) {
        if (record.persistent) {
          record.extra.path = await filesr.materializeFlatFile(volume.srPath, volume.key, { host: hostUuid() });
        } else {
          const dir = join(datapathDir("file"), "overlays");
          mkdirSync(dir, { recursive: true });
          const path = join(dir, `${recordId(volume.uri)}.raw`);
          await sparseCopy(volume, path);
          record.extra.path = path;
        }
      }
      return [["File", { path: record.extra.path }]];
    },
    async release() {
      // Nothing runs on behalf of an attached file: the VM's I/O goes straight to it.
    },
    async close(_volume, record) {
      if (!record.persistent && record.extra.path !== undefined) rmSync(record.extra.path, { force: true });
    },
  },
);

