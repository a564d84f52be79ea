// Changed block tracking: enable/disable, list_changed_blocks, data_destroy.
// See cbt-log.ts for the logs; a log that was open by a writer that died, or that a raw-file writer could
// have bypassed, is "lost" and reports every block as changed: never fewer changes than really happened.
import { CLUSTER_SIZE, cbtLogFile } from "./layout.ts";
import { insertCbtLog, readCbtSync, requireCbtLog } from "./cbt-log.ts";
import { connectSr, statement, transact, type CbtLogRow, type SrConnection } from "./db.ts";
import { deleteUnreferencedLayers, unlinkLayerFiles } from "./layers.ts";
import { liveHandles, withWritersPaused } from "./handles.ts";
import { requireVolume } from "./volume-records.ts";
import { invalid } from "./errors.ts";

/** The interface's `changed_blocks`: bit i (most significant bit first) covers bytes [i*granularity, ...). */
export interface ChangedBlocks {
  granularity: number;
  bitmap: string;
}

/** Starts tracking changed blocks of the volume in a new log (idempotent). */
export async function enableCbt(srPath: string, key: string): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  if (volume.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
  await withWritersPaused(conn, volume.id, () => {
    const current = requireVolume(conn, key);
    if (current.cbt_enabled) return;
    statement(conn, "UPDATE volumes SET cbt_enabled = 1, cbt_log = ? WHERE id = ?").run(insertCbtLog(conn, null, current.size), current.id);
  });
}

/** Stops tracking (idempotent); the volume's logs are kept while snapshots still need them. */
export async function disableCbt(srPath: string, key: string): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  await withWritersPaused(conn, volume.id, () => {
    statement(conn, "UPDATE volumes SET cbt_enabled = 0, cbt_log = NULL WHERE id = ?").run(volume.id);
  });
}

/**
 * Blocks changed between snapshot `key` and the later `key2` (a snapshot or the volume itself), for the
 * byte range [offset, offset + length) of `key2` (`length` -1: to the end). `offset` must be a multiple of
 * the granularity. Fails when CBT does not link the two volumes.
 */
export async function listChangedBlocks(srPath: string, key: string, key2: string, offset: number, length: number): Promise<ChangedBlocks> {
  const conn = connectSr(srPath, { attached: true });
  if (!Number.isSafeInteger(offset) || offset < 0 || offset % CLUSTER_SIZE !== 0) {
    throw invalid("bad_offset", `offset must be a non-negative multiple of ${CLUSTER_SIZE}`);
  }
  if (!Number.isSafeInteger(length) || length < -1) throw invalid("bad_length", "length must be -1 or a non-negative integer");
  return transact(conn, () => {
    liveHandles(conn, "1"); // turns logs of writers that died into lost ones
    const from = requireVolume(conn, key);
    const to = requireVolume(conn, key2);
    if (from.cbt_log === null || to.cbt_log === null) {
      throw invalid("cbt_unavailable", `changed block tracking is not enabled on ${from.cbt_log === null ? key : key2}`);
    }
    const end = length === -1 ? to.size : Math.min(offset + length, to.size);
    const blocks = Math.max(0, Math.ceil((end - offset) / CLUSTER_SIZE));
    const firstBlock = offset / CLUSTER_SIZE;
    const result = new Uint8Array(Math.ceil(blocks / 8));
    const setBit = (i: number) => (result[i >> 3] = result[i >> 3]! | (0x80 >> (i & 7)));
    for (const log of logsBetween(conn, from.cbt_log, to.cbt_log, key, key2)) {
      if (log.state !== "clean") {
        for (let i = 0; i < blocks; i++) setBit(i);
        break;
      }
      const bitmap = readCbtSync(cbtLogFile(conn.path, log.token));
      for (let i = 0; i < blocks; i++) if (firstBlock + i >= bitmap.count || bitmap.get(firstBlock + i)) setBit(i);
    }
    return { granularity: CLUSTER_SIZE, bitmap: Buffer.from(result).toString("base64") };
  });
}

/** Logs newer than `oldest`, from `newest` back; `oldest` must be an ancestor of `newest` (or equal to it). */
function logsBetween(conn: SrConnection, oldest: number, newest: number, key: string, key2: string): CbtLogRow[] {
  const logs: CbtLogRow[] = [];
  const seen = new Set<number>();
  for (let id: number | null = newest; id !== oldest; ) {
    if (id === null || seen.has(id)) throw invalid("cbt_unrelated", `no CBT history leads from ${key} to ${key2}`);
    seen.add(id);
    const log = requireCbtLog(conn, id);
    logs.push(log);
    id = log.parent;
  }
  return logs;
}

/** Drops the data of a CBT-enabled snapshot and keeps its CBT log: the volume becomes CBT_Metadata. */
export async function destroyVolumeData(srPath: string, key: string): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const tokens = transact(conn, () => {
    const volume = requireVolume(conn, key);
    if (!volume.cbt_enabled) throw invalid("cbt_disabled", `volume ${key} does not track changed blocks`);
    if (volume.read_write) throw invalid("not_a_snapshot", `data_destroy applies to snapshots; ${key} is writable`);
    if (volume.top_layer === null) return [];
    const activation = statement(conn, "SELECT 1 FROM activations WHERE volume = ?").get(volume.id);
    if (activation || liveHandles(conn, "volume = ?", volume.id).length > 0) {
      throw invalid("volume_in_use", `volume ${key} is in use`);
    }
    statement(conn, "UPDATE volumes SET top_layer = NULL WHERE id = ?").run(volume.id);
    return deleteUnreferencedLayers(conn);
  });
  unlinkLayerFiles(conn.path, tokens);
}

/**
 * Deletes the records of CBT logs no walk can need any more, inside the caller's transaction; returns
 * their files, to remove after commit.
 */
export function pruneCbtLogs(conn: SrConnection): string[] {
  const files: string[] = [];
  for (;;) {
    // Unreferenced and either a tip (no newer log) or a root (no older log): nothing between two
    // referenced logs, so no list_changed_blocks walk passes through it.
    const log = statement(
      conn,
      `SELECT * FROM cbt_logs l
       WHERE NOT EXISTS (SELECT 1 FROM volumes WHERE cbt_log = l.id)
         AND (l.parent IS NULL OR NOT EXISTS (SELECT 1 FROM cbt_logs c WHERE c.parent = l.id))
       LIMIT 1`,
    ).get() as CbtLogRow | undefined;
    if (!log) return files;
    statement(conn, "UPDATE cbt_logs SET parent = NULL WHERE parent = ?").run(log.id);
    statement(conn, "DELETE FROM cbt_logs WHERE id = ?").run(log.id);
    files.push(cbtLogFile(conn.path, log.token));
  }
}
