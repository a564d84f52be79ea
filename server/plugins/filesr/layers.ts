// Layer records and their files. A volume is a chain of layers: its top layer, then parents up to a base.
// Files are created inside the write transaction that inserts the row (so a GC sweeping orphan files under
// the same lock never sees a half-made layer) and removed only after the transaction dropping the row.
import { layerFiles, clusterCount, newToken } from "./layout.ts";
import path from "node:path";
import { createSparseFileSync, fsyncDirSync, removeFilesSync } from "./durable.ts";
import { DATA, ABSENT, createMapSync, readMapSync, type ChainLayer } from "./cluster-map.ts";
import { statement, type LayerRow, type SrConnection } from "./db.ts";
import { invalid, sizeInWords, spaceRefusal } from "./errors.ts";

/** Guards chain walks against a corrupt database whose parent links form a cycle. */
const MAX_CHAIN_DEPTH = 100_000;

/**
 * A new, empty layer (files created inside the caller's transaction, directory synced). A size or space the
 * filesystem refuses fails in words and leaves no file.
 */
export function insertLayer(conn: SrConnection, layer: { parent: number | null; size: number }): LayerRow {
  const token = newToken();
  const files = layerFiles(conn.path, token);
  try {
    createLayerFilesSync(files, layer.size);
  } catch (error) {
    throw spaceRefusal(error, `a volume of ${sizeInWords(layer.size)}`);
  }
  fsyncDirSync(path.dirname(files.map));
  const result = statement(conn, "INSERT INTO layers (token, parent, size) VALUES (?, ?, ?)").run(token, layer.parent, layer.size);
  return { id: Number(result.lastInsertRowid), token, parent: layer.parent, size: layer.size, complete: 0, allocated: 0, stray: 0 };
}

/** The data file and allocation map of a new layer: both, or neither. */
function createLayerFilesSync(files: ReturnType<typeof layerFiles>, size: number): void {
  createSparseFileSync(files.data, size);
  try {
    createMapSync(files.map, clusterCount(size));
  } catch (error) {
    removeFilesSync([files.data]);
    throw error;
  }
}

export function requireLayer(conn: SrConnection, id: number): LayerRow {
  const row = statement(conn, "SELECT * FROM layers WHERE id = ?").get(id) as LayerRow | undefined;
  if (!row) throw invalid("layer_missing", `layer ${id} is missing from the SR metadata`);
  return row;
}

/** The chain starting at layer `top`, top first. */
export function chainOf(conn: SrConnection, top: number): LayerRow[] {
  const rows = statement(
    conn,
    `WITH RECURSIVE chain(id, depth) AS (
       SELECT ?, 0
       UNION ALL
       SELECT layers.parent, chain.depth + 1 FROM chain JOIN layers ON layers.id = chain.id
       WHERE layers.parent IS NOT NULL AND chain.depth < ${MAX_CHAIN_DEPTH}
     )
     SELECT layers.* FROM chain JOIN layers ON layers.id = chain.id ORDER BY chain.depth`,
  ).all(top) as unknown as LayerRow[];
  if (rows.length === 0) throw invalid("layer_missing", `layer ${top} is missing from the SR metadata`);
  const last = rows[rows.length - 1]!;
  if (last.parent !== null) throw invalid("chain_broken", `layer chain from ${top} is broken at layer ${last.id}`);
  return rows;
}

/** Deletes every layer nothing refers to (volume, child layer, handle or merge); returns their tokens. */
export function deleteUnreferencedLayers(conn: SrConnection): string[] {
  const tokens: string[] = [];
  for (;;) {
    const rows = statement(
      conn,
      `SELECT id, token FROM layers l
       WHERE NOT EXISTS (SELECT 1 FROM volumes WHERE top_layer = l.id)
         AND NOT EXISTS (SELECT 1 FROM layers c WHERE c.parent = l.id)
         AND NOT EXISTS (SELECT 1 FROM handles WHERE write_layer = l.id)
         AND NOT EXISTS (SELECT 1 FROM merges WHERE parent = l.id OR child = l.id)`,
    ).all() as Array<{ id: number; token: string }>;
    if (rows.length === 0) return tokens;
    for (const row of rows) {
      statement(conn, "DELETE FROM layers WHERE id = ?").run(row.id);
      tokens.push(row.token);
    }
  }
}

export function unlinkLayerFiles(srPath: string, tokens: string[]): void {
  removeFilesSync(tokens.flatMap((token) => Object.values(layerFiles(srPath, token))));
}

/** Asks a GC merge involving `layer` to give up: someone is about to write it or change its shape. */
export function cancelMergesOf(conn: SrConnection, layer: number): void {
  statement(conn, "UPDATE merges SET cancelled = 1 WHERE child = ? OR parent = ?").run(layer, layer);
}

/**
 * Marks `layer` as possibly holding bytes outside its DATA clusters (a writer is about to write it, or a
 * merge to copy into it); returns whether it was already so.
 */
export function markStray(conn: SrConnection, layer: number): boolean {
  const row = statement(conn, "SELECT stray FROM layers WHERE id = ?").get(layer) as { stray: number } | undefined;
  statement(conn, "UPDATE layers SET stray = 1 WHERE id = ?").run(layer);
  return row?.stray === 1;
}

/** Fills for clusters added by growing a layer: a complete layer stays complete (its file reads zeros there). */
export function growthFill(layer: LayerRow): typeof DATA | typeof ABSENT {
  return layer.complete ? DATA : ABSENT;
}

/** The chain from `top` with each layer's allocation map read from disk, for walks that do no data I/O. */
export function loadChainMaps(conn: SrConnection, top: number): Array<LayerRow & ChainLayer> {
  return chainOf(conn, top).map((row) => ({
    ...row,
    count: clusterCount(row.size),
    map: readMapSync(layerFiles(conn.path, row.token).map),
  }));
}
