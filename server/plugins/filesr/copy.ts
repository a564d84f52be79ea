// Volume.copy: a writable, flat (single-layer) copy in another SR or the same one, reading only the
// clusters that hold data.
import fs from "node:fs";
import { clusterCount, CLUSTER_SIZE, layerFiles } from "./layout.ts";
import { ClusterMap, DATA, writeMapSync } from "./cluster-map.ts";
import { connectSr, statement, transact } from "./db.ts";
import { insertLayer, unlinkLayerFiles } from "./layers.ts";
import { deleteHandle, insertHandle } from "./handles.ts";
import { insertVolume, requireVolume, selectVolume, type Volume } from "./volume-records.ts";
import { openVolumeData } from "./volume-data.ts";
import { fdatasync, writeFull } from "./file-io.ts";

const CHUNK = 4 * 1024 * 1024;

/** `readOnly` makes the copy a snapshot by copy (for volumes written through their raw file). */
export async function copyVolume(srPath: string, key: string, destSrPath: string, options: { readOnly?: boolean } = {}): Promise<Volume> {
  const sourceConn = connectSr(srPath, { attached: true });
  const origin = requireVolume(sourceConn, key);
  const source = await openVolumeData(srPath, key, { readOnly: true });
  try {
    const dest = connectSr(destSrPath, { attached: true });
    // The new layer belongs to a "copy" handle until the volume row exists: a crash leaves it to GC.
    const { layer, handleId } = transact(dest, () => {
      const layer = insertLayer(dest, { parent: null, size: source.size });
      return { layer, handleId: insertHandle(dest, "copy", { writeLayer: layer.id }) };
    });
    const files = layerFiles(dest.path, layer.token);
    try {
      const map = new ClusterMap(clusterCount(source.size));
      const fd = fs.openSync(files.data, "r+");
      try {
        const buffer = Buffer.alloc(CHUNK);
        for (let offset = 0; offset < source.size; ) {
          for (const extent of await source.blockStatus(offset, source.size - offset)) {
            if (extent.flags === 0) {
              for (let at = offset; at < offset + extent.length; at += CHUNK) {
                const chunk = buffer.subarray(0, Math.min(CHUNK, offset + extent.length - at));
                await source.read(at, chunk);
                await writeFull(fd, [chunk], at);
              }
              for (let cluster = offset / CLUSTER_SIZE; cluster < (offset + extent.length) / CLUSTER_SIZE; cluster++) {
                map.set(cluster, DATA);
              }
            }
            offset += extent.length;
          }
        }
        await fdatasync(fd);
      } finally {
        fs.closeSync(fd);
      }
      const id = transact(dest, () => {
        writeMapSync(files.map, map);
        statement(dest, "UPDATE layers SET allocated = ? WHERE id = ?").run(map.allocated, layer.id);
        deleteHandle(dest, handleId);
        return insertVolume(dest, {
          name: origin.name,
          description: origin.description,
          read_write: options.readOnly ? 0 : 1,
          sharable: origin.sharable,
          size: source.size,
          top_layer: layer.id,
          cbt_enabled: 0,
          cbt_log: null,
          lineage: origin.lineage,
        });
      });
      return selectVolume(dest, id);
    } catch (error) {
      transact(dest, () => {
        deleteHandle(dest, handleId);
        statement(dest, "DELETE FROM layers WHERE id = ?").run(layer.id);
      });
      unlinkLayerFiles(dest.path, [layer.token]);
      throw error;
    }
  } finally {
    await source.close();
  }
}
