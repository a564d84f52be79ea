// Garbage collection: frees layers nothing uses and coalesces chains, like XCP-ng's coalescing GC.
//
// A merge folds child layer C into its parent P when P is hidden (no volume reads from it directly) and C is
// P's only child: C's clusters are copied into P, then one transaction points C's users at P and drops C.
// While copying, every cluster written into P is one that C shadows, so no volume reads a different byte
// at any moment; a crash leaves the merge row behind and the next run redoes the (idempotent) copy.
// A merge never starts on a C that a datapath has activated or opened, and whoever starts writing C (or
// resizes it) cancels a running merge, which then gives up at its commit.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CLUSTER_SIZE, clusterCount, layerFiles, srFiles } from "./layout.ts";
import { ABSENT, DATA, ZERO, readMapSync, writeMapSync } from "./cluster-map.ts";
import { connectSr, nowIso, statement, transact, type LayerRow, type SrConnection } from "./db.ts";
import { deleteUnreferencedLayers, requireLayer, unlinkLayerFiles } from "./layers.ts";
import { deleteHandle, insertHandle, liveHandles, type HandleRow } from "./handles.ts";
import { isTemporaryFile, removeFilesSync } from "./durable.ts";
import { pruneCbtLogs } from "./cbt.ts";
import { fdatasync, readFull, writeFull } from "./file-io.ts";
import { retireDeadIoRecorders } from "./stats.ts";
import { spawnDetached } from "../../detached-process.ts";

const CHUNK = 4 * 1024 * 1024;

export interface GcReport {
  /** Set when another collector is already running on the SR. */
  skipped?: string;
  /** Passes made: one, and one more for each time another was asked for while it ran. */
  passes: number;
  merged: number;
  /** Merges given up because the child started being written or changed. */
  cancelled: number;
  deletedLayers: number;
  deletedFiles: number;
  prunedCbtLogs: number;
}

interface MergeRow {
  id: number;
  parent: number;
  child: number;
  cancelled: number;
}

/** Where C is in use, a merge must not start or commit. */
const CHILD_IN_USE = `
  EXISTS (SELECT 1 FROM handles WHERE write_layer = :child)
  OR EXISTS (SELECT 1 FROM volumes v WHERE v.top_layer = :child
             AND (EXISTS (SELECT 1 FROM activations a WHERE a.volume = v.id)
                  OR EXISTS (SELECT 1 FROM handles h WHERE h.volume = v.id)))`;

/** Takes over a merge left by a dead collector, or starts the next one; null when there is nothing to merge. */
function nextMerge(conn: SrConnection, owner: number): MergeRow | null {
  return transact(conn, () => {
    liveHandles(conn, "1");
    const orphan = statement(conn, "SELECT * FROM merges ORDER BY id LIMIT 1").get() as MergeRow | undefined;
    if (orphan) {
      statement(conn, "UPDATE merges SET owner = ? WHERE id = ?").run(owner, orphan.id);
      return orphan;
    }
    const candidate = statement(
      conn,
      `SELECT p.id AS parent, c.id AS child FROM layers p JOIN layers c ON c.parent = p.id
       WHERE NOT EXISTS (SELECT 1 FROM volumes WHERE top_layer = p.id)
         AND NOT EXISTS (SELECT 1 FROM handles WHERE write_layer = p.id)
         AND (SELECT count(*) FROM layers s WHERE s.parent = p.id) = 1
         AND NOT (${CHILD_IN_USE.replaceAll(":child", "c.id")})
       ORDER BY c.allocated LIMIT 1`,
    ).get() as { parent: number; child: number } | undefined;
    if (!candidate) return null;
    // A hidden parent is nobody's raw file: it may take ZERO clusters from the child, and from now on
    // its data file may hold bytes its map does not claim.
    statement(conn, "UPDATE layers SET complete = 0, stray = 1 WHERE id = ?").run(candidate.parent);
    const result = statement(conn, "INSERT INTO merges (parent, child, owner, started_at) VALUES (?, ?, ?, ?)").run(
      candidate.parent,
      candidate.child,
      owner,
      nowIso(),
    );
    return { id: Number(result.lastInsertRowid), ...candidate, cancelled: 0 };
  });
}

function isCancelled(conn: SrConnection, id: number): boolean {
  const row = statement(conn, "SELECT cancelled FROM merges WHERE id = ?").get(id) as { cancelled: number } | undefined;
  return !row || row.cancelled === 1;
}

async function copyRun(from: number, to: number, buffer: Buffer, start: number, length: number): Promise<void> {
  for (let done = 0; done < length; done += buffer.length) {
    const chunk = buffer.subarray(0, Math.min(buffer.length, length - done));
    await readFull(from, chunk, 0, chunk.length, start + done);
    await writeFull(to, [chunk], start + done);
  }
}

/** Copies C into P and commits; returns the child's token if merged, null if the merge gave up. */
async function runMerge(conn: SrConnection, merge: MergeRow): Promise<string | null> {
  const { parent, child } = transact(conn, () => ({ parent: requireLayer(conn, merge.parent), child: requireLayer(conn, merge.child) }));
  if (merge.cancelled || child.parent !== parent.id) return abandon(conn, merge);
  const parentFiles = layerFiles(conn.path, parent.token);
  const childFiles = layerFiles(conn.path, child.token);
  const childMap = readMapSync(childFiles.map);
  const childCount = clusterCount(child.size);
  const merged = readMapSync(parentFiles.map).grown(Math.max(clusterCount(parent.size), childCount), ABSENT);
  const target = fs.openSync(parentFiles.data, "r+");
  const source = fs.openSync(childFiles.data, "r");
  try {
    if (fs.fstatSync(target).size < child.size) fs.ftruncateSync(target, child.size);
    const buffer = Buffer.alloc(CHUNK);
    for (let cluster = 0; cluster < childCount; ) {
      const state = childMap.get(cluster);
      if (state === ZERO) merged.set(cluster, ZERO);
      if (state !== DATA) {
        cluster++;
        continue;
      }
      let run = 1;
      while (cluster + run < childCount && run * CLUSTER_SIZE < CHUNK && childMap.get(cluster + run) === DATA) run++;
      await copyRun(source, target, buffer, cluster * CLUSTER_SIZE, run * CLUSTER_SIZE);
      for (let i = 0; i < run; i++) merged.set(cluster + i, DATA);
      cluster += run;
      if (isCancelled(conn, merge.id)) return abandon(conn, merge);
    }
    await fdatasync(target);
  } finally {
    fs.closeSync(target);
    fs.closeSync(source);
  }
  return transact(conn, () => {
    const now = statement(conn, "SELECT * FROM layers WHERE id = ?").get(child.id) as LayerRow | undefined;
    const parentStillHidden =
      statement(conn, "SELECT 1 FROM volumes WHERE top_layer = ?").get(parent.id) === undefined &&
      (statement(conn, "SELECT count(*) AS n FROM layers WHERE parent = ?").get(parent.id) as { n: number }).n === 1;
    const childInUse = statement(conn, `SELECT (${CHILD_IN_USE}) AS busy`).get({ child: child.id }) as { busy: number };
    if (isCancelled(conn, merge.id) || !now || now.parent !== parent.id || now.size !== child.size || !parentStillHidden || childInUse.busy) {
      statement(conn, "DELETE FROM merges WHERE id = ?").run(merge.id);
      return null;
    }
    writeMapSync(parentFiles.map, merged);
    statement(conn, "UPDATE layers SET size = ?, allocated = ? WHERE id = ?").run(Math.max(parent.size, child.size), merged.allocated, parent.id);
    statement(conn, "UPDATE volumes SET top_layer = ? WHERE top_layer = ?").run(parent.id, child.id);
    statement(conn, "UPDATE layers SET parent = ? WHERE parent = ?").run(parent.id, child.id);
    statement(conn, "DELETE FROM merges WHERE id = ?").run(merge.id);
    statement(conn, "DELETE FROM layers WHERE id = ?").run(child.id);
    return child.token;
  });
}

/** Gives up a merge: what was copied into P so far stays shadowed by C, so nothing needs undoing. */
function abandon(conn: SrConnection, merge: MergeRow): null {
  transact(conn, () => statement(conn, "DELETE FROM merges WHERE id = ?").run(merge.id));
  return null;
}

/** Files in layers/ and cbt/ that no record names (a crash between file and metadata), and temp files. */
function sweepOrphanFiles(conn: SrConnection): number {
  return transact(conn, () => {
    const layerTokens = new Set((statement(conn, "SELECT token FROM layers").all() as Array<{ token: string }>).map((row) => row.token));
    const logTokens = new Set((statement(conn, "SELECT token FROM cbt_logs").all() as Array<{ token: string }>).map((row) => row.token));
    const files = srFiles(conn.path);
    const orphans: string[] = [];
    for (const [dir, tokens] of [[files.layers, layerTokens], [files.cbt, logTokens]] as const) {
      for (const name of fs.readdirSync(dir)) {
        if (isTemporaryFile(name) || !tokens.has(name.slice(0, name.indexOf(".")))) orphans.push(path.join(dir, name));
      }
    }
    removeFilesSync(orphans);
    return orphans.length;
  });
}

/**
 * Garbage collection over the SR: forgets dead processes' handles, frees unreferenced layers, merges every
 * mergeable parent/child pair, removes orphan files and CBT logs nothing needs. Only one collector runs per SR
 * at a time: a second returns at once with `skipped`, after asking the running one for another pass (a request
 * made while that one was already past what it asked for).
 *
 * A pass asked for while one runs is marked on the collector's handle (`pause = 'requested'`, which on a
 * collector's handle means nothing else): it runs one more pass before it ends. The mark and the end are each
 * one write transaction, so a request either finds the collector still there and marks it, or finds it gone.
 */
export async function collectGarbage(srPath: string): Promise<GcReport> {
  const conn = connectSr(srPath);
  const report: GcReport = { passes: 0, merged: 0, cancelled: 0, deletedLayers: 0, deletedFiles: 0, prunedCbtLogs: 0 };
  const lease = transact(conn, (): { running: HandleRow } | { id: number } => {
    // Also forgets every dead process's handle, freeing its temporary layers for the loop below.
    const running = liveHandles(conn, "1").find((handle) => handle.purpose === "gc");
    if (running) {
      markPassWanted(conn, running.id);
      return { running };
    }
    return { id: insertHandle(conn, "gc", {}) };
  });
  if ("running" in lease) return { ...report, skipped: `garbage collection already running in process ${lease.running.pid}` };
  let ended = false;
  try {
    do await collectOnce(conn, lease.id, report);
    while (!(ended = endUnlessPassWanted(conn, lease.id)));
  } finally {
    if (!ended) transact(conn, () => deleteHandle(conn, lease.id));
  }
  return report;
}

function markPassWanted(conn: SrConnection, gcHandle: number): void {
  statement(conn, "UPDATE handles SET pause = 'requested' WHERE id = ?").run(gcHandle);
}

/** Ends the collector's lease, unless another pass was asked for meanwhile (then clears the request). */
function endUnlessPassWanted(conn: SrConnection, gcHandle: number): boolean {
  return transact(conn, () => {
    const row = statement(conn, "SELECT pause FROM handles WHERE id = ?").get(gcHandle) as { pause: string | null } | undefined;
    if (row?.pause === "requested") {
      statement(conn, "UPDATE handles SET pause = NULL WHERE id = ?").run(gcHandle);
      return false;
    }
    deleteHandle(conn, gcHandle);
    return true;
  });
}

async function collectOnce(conn: SrConnection, gcHandle: number, report: GcReport): Promise<void> {
  report.passes++;
  retireDeadIoRecorders(conn);
  for (;;) {
    const tokens = transact(conn, () => deleteUnreferencedLayers(conn));
    unlinkLayerFiles(conn.path, tokens);
    report.deletedLayers += tokens.length;
    const merge = nextMerge(conn, gcHandle);
    if (!merge) break;
    const mergedChild = await runMerge(conn, merge);
    if (mergedChild) {
      unlinkLayerFiles(conn.path, [mergedChild]);
      report.merged++;
    } else {
      report.cancelled++;
    }
  }
  report.deletedFiles += sweepOrphanFiles(conn);
  const logs = transact(conn, () => pruneCbtLogs(conn));
  removeFilesSync(logs);
  report.prunedCbtLogs += logs.length;
}

/**
 * Asks for garbage collection of the SR: a collector already running makes one more pass, else one starts in
 * a detached background process (its pid answered). A process start costs tens of ms of CPU, and every
 * destroy and deactivate asks: under load, most find one running.
 */
export function startGarbageCollector(srPath: string): number | undefined {
  let asked = false;
  try {
    const conn = connectSr(srPath);
    asked = transact(conn, () => {
      const running = liveHandles(conn, "purpose = 'gc'")[0];
      if (running !== undefined) markPassWanted(conn, running.id);
      return running !== undefined;
    });
  } catch {
    // The SR unreadable here (gone, its metadata locked): a collector of its own finds out, and says so.
  }
  if (asked) return undefined;
  const main = fileURLToPath(new URL("./gc-main.ts", import.meta.url));
  const child = spawnDetached(process.execPath, [main, path.resolve(srPath)], { stdio: "ignore" });
  child.unref();
  return child.pid ?? -1;
}
