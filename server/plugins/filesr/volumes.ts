// Volume verbs of the control plane: create, list, stat, snapshot, clone, revert, destroy, resize, metadata.
// Snapshot and clone cost O(metadata): the current top layer is frozen as a shared parent and the writable
// volumes get fresh empty top layers; a read-only volume (snapshot) reads straight from a frozen layer.
import { randomUUID } from "./random.ts";
import { clusterCount, cbtLogFile, layerFiles, roundUpToCluster } from "./layout.ts";
import { readMapSync, writeMapSync } from "./cluster-map.ts";
import { resizeFileSync } from "./durable.ts";
import { insertCbtLog, readCbtSync, requireCbtLog, writeCbtSync } from "./cbt-log.ts";
import { connectSr, statement, transact, type SrConnection, type VolumeRow } from "./db.ts";
import { cancelMergesOf, deleteUnreferencedLayers, growthFill, insertLayer, requireLayer, unlinkLayerFiles } from "./layers.ts";
import { liveHandles, withWritersPaused } from "./handles.ts";
import { insertVolume, requireVolume, selectVolume, selectVolumes, validateText, type Volume } from "./volume-records.ts";
import { activatedElsewhere, invalid, sizeInWords, spaceRefusal } from "./errors.ts";
import { copyVolume } from "./copy.ts";
import { localHostId } from "./liveness.ts";

function validateSize(size: unknown): number {
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) {
    throw invalid("bad_size", `size must be a non-negative integer below 2^53, got ${String(size)}`);
  }
  return roundUpToCluster(size);
}

/** Refuses to change a volume that a datapath has activated or a live process has open. */
function requireIdle(conn: SrConnection, volume: VolumeRow, action: string): void {
  const activation = statement(conn, "SELECT host, mode FROM activations WHERE volume = ? LIMIT 1").get(volume.id) as
    | { host: string; mode: string }
    | undefined;
  if (activation) {
    throw invalid("volume_in_use", `cannot ${action} volume ${volume.key}: activated (${activation.mode}) on host ${activation.host}`);
  }
  const handle = liveHandles(conn, "volume = ?", volume.id)[0];
  if (handle) throw invalid("volume_in_use", `cannot ${action} volume ${volume.key}: open by process ${handle.pid}`);
}

/** Creates an empty writable volume of at least `size` bytes (rounded up to the 64 KiB cluster size). */
export async function createVolume(
  srPath: string,
  options: { name: string; description: string; size: number; sharable?: boolean },
): Promise<Volume> {
  const conn = connectSr(srPath, { attached: true });
  const name = validateText(options.name, "name");
  const description = validateText(options.description, "description");
  const size = validateSize(options.size);
  const id = transact(conn, () => {
    const layer = insertLayer(conn, { parent: null, size });
    return insertVolume(conn, {
      name,
      description,
      read_write: 1,
      sharable: options.sharable ? 1 : 0,
      size,
      top_layer: layer.id,
      cbt_enabled: 0,
      cbt_log: null,
      lineage: randomUUID(),
    });
  });
  return selectVolume(conn, id);
}

/** Every volume of the SR, in creation order (one query, no file I/O). */
export async function listVolumes(srPath: string): Promise<Volume[]> {
  return selectVolumes(connectSr(srPath, { attached: true }));
}

export async function statVolume(srPath: string, key: string): Promise<Volume> {
  const conn = connectSr(srPath, { attached: true });
  return selectVolume(conn, requireVolume(conn, key).id);
}

/**
 * Freezes the volume's current content for a new volume: the read-only snapshot or a writable clone.
 * A live datapath writing the volume is paused for the metadata change and then writes to a new top layer.
 */
async function branch(srPath: string, key: string, kind: "snapshot" | "clone", host: string): Promise<Volume> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  if (volume.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
  const elsewhere = statement(conn, "SELECT host FROM activations WHERE volume = ? AND mode = 'rw' AND host <> ? LIMIT 1").get(
    volume.id,
    host,
  ) as { host: string } | undefined;
  if (elsewhere) throw activatedElsewhere(elsewhere.host, key);
  const top = requireLayer(conn, volume.top_layer);
  const rawWriter =
    top.complete === 1 &&
    statement(conn, "SELECT 1 FROM activations WHERE volume = ? AND mode = 'rw'").get(volume.id) !== undefined &&
    liveHandles(conn, "volume = ? AND purpose = 'write'", volume.id).length === 0;
  if (volume.read_write && rawWriter) {
    // Nothing can pause a writer of the raw file: freeze its content by copying it, as xapi's simple-file
    // plugin does. Costs a read of the whole volume instead of a metadata change.
    return copyVolume(srPath, key, srPath, { readOnly: kind === "snapshot" });
  }
  const id = await withWritersPaused(conn, volume.id, () => {
    const current = requireVolume(conn, key);
    if (current.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
    const frozen = current.top_layer;
    if (current.read_write) {
      const fresh = insertLayer(conn, { parent: frozen, size: current.size });
      statement(conn, "UPDATE volumes SET top_layer = ? WHERE id = ?").run(fresh.id, current.id);
    }
    const common = { name: current.name, description: current.description, sharable: current.sharable, size: current.size, lineage: current.lineage };
    if (kind === "clone") {
      const own = insertLayer(conn, { parent: frozen, size: current.size });
      return insertVolume(conn, { ...common, read_write: 1, top_layer: own.id, cbt_enabled: 0, cbt_log: null });
    }
    const tracked = current.cbt_enabled === 1 && current.cbt_log !== null;
    if (tracked && current.read_write) {
      // The snapshot keeps the log of changes up to now; the volume continues in a new log after it.
      statement(conn, "UPDATE volumes SET cbt_log = ? WHERE id = ?").run(insertCbtLog(conn, current.cbt_log, current.size), current.id);
    }
    return insertVolume(conn, {
      ...common,
      read_write: 0,
      top_layer: frozen,
      cbt_enabled: tracked ? 1 : 0,
      cbt_log: tracked ? current.cbt_log : null,
    });
  });
  return selectVolume(conn, id);
}

/** A read-only snapshot: name and description copied, keys set with setVolumeKey not. */
export async function snapshotVolume(srPath: string, key: string, options: { host?: string } = {}): Promise<Volume> {
  return branch(srPath, key, "snapshot", options.host ?? localHostId());
}

/** A writable clone: name and description copied, keys not, CBT off. */
export async function cloneVolume(srPath: string, key: string, options: { host?: string } = {}): Promise<Volume> {
  return branch(srPath, key, "clone", options.host ?? localHostId());
}

/** Gives volume `key` the content (and size) of the read-only `snapshotKey`; `key` keeps its identity. */
export async function revertVolume(srPath: string, snapshotKey: string, key: string): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const tokens = transact(conn, () => {
    const snapshot = requireVolume(conn, snapshotKey);
    const volume = requireVolume(conn, key);
    if (snapshot.top_layer === null) throw invalid("no_data", `snapshot ${snapshotKey} has no data (data destroyed)`);
    if (snapshot.read_write) throw invalid("not_a_snapshot", `volume ${snapshotKey} is writable, not a snapshot`);
    if (!volume.read_write) throw invalid("read_only_volume", `volume ${key} is read-only`);
    requireIdle(conn, volume, "revert");
    if (volume.top_layer !== null) cancelMergesOf(conn, volume.top_layer);
    const fresh = insertLayer(conn, { parent: snapshot.top_layer, size: snapshot.size });
    const log = volume.cbt_enabled ? insertCbtLog(conn, snapshot.cbt_log, snapshot.size) : volume.cbt_log;
    statement(conn, "UPDATE volumes SET top_layer = ?, size = ?, cbt_log = ? WHERE id = ?").run(fresh.id, snapshot.size, log, volume.id);
    return deleteUnreferencedLayers(conn);
  });
  unlinkLayerFiles(conn.path, tokens);
}

/**
 * Removes the volume. Layers only it used are freed at once; shared parents it leaves with one user are
 * merged by the next collectGarbage (start one with startGarbageCollector).
 */
export async function destroyVolume(srPath: string, key: string): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const tokens = transact(conn, () => {
    const volume = requireVolume(conn, key);
    requireIdle(conn, volume, "destroy");
    statement(conn, "DELETE FROM volumes WHERE id = ?").run(volume.id);
    return deleteUnreferencedLayers(conn);
  });
  unlinkLayerFiles(conn.path, tokens);
}

/** Grows the volume to at least `newSize` bytes (rounded up to the cluster size). Shrinking is refused. */
export async function resizeVolume(srPath: string, key: string, newSize: number): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const size = validateSize(newSize);
  transact(conn, () => {
    const volume = requireVolume(conn, key);
    if (volume.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
    if (!volume.read_write) throw invalid("read_only_volume", `volume ${key} is read-only`);
    if (size < volume.size) throw invalid("shrink", `volume ${key} is ${volume.size} bytes; shrinking to ${size} is not supported`);
    if (size === volume.size) return;
    const writer = liveHandles(conn, "volume = ? AND purpose <> 'read'", volume.id)[0];
    if (writer) throw invalid("volume_in_use", `volume ${key} is open for writing by process ${writer.pid}; resize it offline`);
    const top = requireLayer(conn, volume.top_layer);
    cancelMergesOf(conn, top.id);
    // Files first: if we crash before commit they are merely larger than the metadata says, which is harmless.
    const files = layerFiles(conn.path, top.token);
    try {
      resizeFileSync(files.data, size);
    } catch (error) {
      throw spaceRefusal(error, `volume ${key} grown to ${sizeInWords(size)}`);
    }
    const map = readMapSync(files.map).grown(clusterCount(size), growthFill(top));
    writeMapSync(files.map, map);
    statement(conn, "UPDATE layers SET size = ?, allocated = ? WHERE id = ?").run(size, map.allocated, top.id);
    statement(conn, "UPDATE volumes SET size = ? WHERE id = ?").run(size, volume.id);
    if (volume.cbt_log !== null) {
      const log = requireCbtLog(conn, volume.cbt_log);
      const file = cbtLogFile(conn.path, log.token);
      writeCbtSync(file, readCbtSync(file).grown(clusterCount(size)));
      statement(conn, "UPDATE cbt_logs SET size = ? WHERE id = ?").run(size, log.id);
    }
  });
}

function updateVolume(srPath: string, key: string, sql: string, ...values: string[]): void {
  const conn = connectSr(srPath, { attached: true });
  transact(conn, () => {
    const volume = requireVolume(conn, key);
    statement(conn, sql).run(...values, volume.id);
  });
}

export async function setVolumeName(srPath: string, key: string, name: string): Promise<void> {
  updateVolume(srPath, key, "UPDATE volumes SET name = ? WHERE id = ?", validateText(name, "name"));
}

export async function setVolumeDescription(srPath: string, key: string, description: string): Promise<void> {
  updateVolume(srPath, key, "UPDATE volumes SET description = ? WHERE id = ?", validateText(description, "description"));
}

/** Stores metadata pair k=v on the volume, byte for byte; the library does not interpret it. */
export async function setVolumeKey(srPath: string, key: string, k: string, v: string): Promise<void> {
  updateVolume(
    srPath,
    key,
    "INSERT INTO volume_keys (k, v, volume) VALUES (?, ?, ?) ON CONFLICT (volume, k) DO UPDATE SET v = excluded.v",
    validateText(k, "metadata key"),
    validateText(v, "metadata value"),
  );
}

export async function unsetVolumeKey(srPath: string, key: string, k: string): Promise<void> {
  updateVolume(srPath, key, "DELETE FROM volume_keys WHERE k = ? AND volume = ?", validateText(k, "metadata key"));
}

/** Keys of the other volumes of the same snapshot/clone/copy lineage that still hold data, newest first. */
export async function findSimilarVolumes(srPath: string, key: string): Promise<string[]> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  const rows = statement(
    conn,
    "SELECT key FROM volumes WHERE lineage = ? AND id <> ? AND top_layer IS NOT NULL ORDER BY id DESC",
  ).all(volume.lineage, volume.id) as Array<{ key: string }>;
  return rows.map((row) => row.key);
}
