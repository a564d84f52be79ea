// A layer chain opened for I/O: file descriptors plus allocation maps, top first.
import fs from "node:fs";
import { clusterCount, layerFiles } from "./layout.ts";
import { readMapSync, type ChainLayer } from "./cluster-map.ts";
import type { LayerRow } from "./db.ts";
import { invalid } from "./errors.ts";

export interface OpenLayer extends ChainLayer {
  id: number;
  token: string;
  fd: number;
  /** Map file descriptor, only for the layer this handle writes. */
  mapFd: number | null;
  hasParent: boolean;
  complete: boolean;
}

/**
 * Opens the layers of `rows`; `writeLayer` is opened for writing (with its map file). Descriptors of layers
 * in `reuse` are kept (a reload after a snapshot); maps are always read afresh, as GC may have merged into them.
 */
export function openLayers(srPath: string, rows: LayerRow[], writeLayer: number | null, reuse = new Map<number, OpenLayer>()): OpenLayer[] {
  const opened: OpenLayer[] = [];
  try {
    for (const row of rows) {
      const files = layerFiles(srPath, row.token);
      const writable = row.id === writeLayer;
      const previous = reuse.get(row.id);
      const fd = previous && !writable ? previous.fd : fs.openSync(files.data, writable ? "r+" : "r");
      const map = readMapSync(files.map);
      const count = clusterCount(row.size);
      if (map.count < count) throw invalid("map_corrupt", `${files.map} covers fewer clusters than its layer`);
      opened.push({
        id: row.id,
        token: row.token,
        count,
        fd,
        map,
        mapFd: writable ? fs.openSync(files.map, "r+") : null,
        hasParent: row.parent !== null,
        complete: row.complete === 1,
      });
    }
    return opened;
  } catch (error) {
    for (const layer of opened) closeLayerSync(layer, reuse);
    throw error;
  }
}

export function closeLayerSync(layer: OpenLayer, keep = new Map<number, OpenLayer>()): void {
  if (keep.get(layer.id)?.fd !== layer.fd) fs.closeSync(layer.fd);
  if (layer.mapFd !== null) fs.closeSync(layer.mapFd);
}
