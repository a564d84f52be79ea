// Handles: rows saying "process P uses volume V / writes layer L" (datapath I/O, copies, GC runs, daemons).
// They make writers exclusive, keep GC away from layers in use, root temporary layers, and carry the
// pause handshake that lets snapshot/clone/CBT changes swap the layer a live datapath writes to.
import { setTimeout as sleep } from "node:timers/promises";
import { nowIso, statement, transact, type SrConnection } from "./db.ts";
import { currentProcess, isAlive, localHostId, type ProcessIdentity } from "./liveness.ts";
import { invalid } from "./errors.ts";

export type HandlePurpose = "read" | "write" | "overlay" | "copy" | "materialize" | "gc" | "daemon";

export interface HandleRow {
  id: number;
  purpose: HandlePurpose;
  volume: number | null;
  write_layer: number | null;
  host: string;
  machine: string;
  boot_id: string;
  pid: number;
  pid_start: string;
  pause: "requested" | "paused" | null;
  pauser: string | null;
}

const PAUSE_TIMEOUT_MS = 10_000;

function handleIdentity(row: HandleRow): ProcessIdentity {
  return { machine: row.machine, bootId: row.boot_id, pid: row.pid, pidStart: row.pid_start };
}

function handleIsAlive(row: HandleRow): boolean {
  return isAlive(handleIdentity(row));
}

export function insertHandle(
  conn: SrConnection,
  purpose: HandlePurpose,
  target: { volume?: number | null; writeLayer?: number | null; host?: string },
): number {
  const me = currentProcess();
  const result = statement(
    conn,
    `INSERT INTO handles (purpose, volume, write_layer, host, machine, boot_id, pid, pid_start, opened_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    purpose,
    target.volume ?? null,
    target.writeLayer ?? null,
    target.host ?? localHostId(),
    me.machine,
    me.bootId,
    me.pid,
    me.pidStart,
    nowIso(),
  );
  return Number(result.lastInsertRowid);
}

export function deleteHandle(conn: SrConnection, id: number): void {
  statement(conn, "DELETE FROM handles WHERE id = ?").run(id);
}

/**
 * Forgets handles of processes that died (their temporary layers become unreferenced; CBT logs they were
 * writing can no longer be trusted) and returns the live ones matching `where` (an SQL condition).
 */
export function liveHandles(conn: SrConnection, where: string, ...params: Array<number | string>): HandleRow[] {
  return transact(conn, () => {
    const rows = statement(conn, `SELECT * FROM handles WHERE ${where}`).all(...params) as unknown as HandleRow[];
    return rows.filter((row) => {
      if (handleIsAlive(row)) return true;
      statement(conn, "UPDATE cbt_logs SET state = 'lost', writer = NULL WHERE writer = ? AND state = 'dirty'").run(
        row.id,
      );
      deleteHandle(conn, row.id);
      return false;
    });
  });
}

/**
 * Runs the synchronous metadata `change` for volume `volumeId` while no datapath writes to it: live writers
 * are asked to pause (they drain, flush and acknowledge), `change` runs in a transaction that also releases
 * them, and they reload the volume's layers before writing again.
 */
export async function withWritersPaused<T>(conn: SrConnection, volumeId: number, change: () => T): Promise<T> {
  const pauser = JSON.stringify(currentProcess());
  const first = transact(conn, (): { done: T } | { ids: number[] } => {
    const live = liveHandles(conn, "volume = ? AND purpose IN ('write', 'materialize', 'copy')", volumeId);
    if (live.some((row) => row.purpose !== "write")) {
      throw invalid("volume_busy", "volume is being materialized or copied; retry when that finishes");
    }
    if (live.length === 0) return { done: change() };
    for (const row of live) {
      // A writer already paused for another caller stays paused; that caller's release is handled below.
      statement(conn, "UPDATE handles SET pause = 'requested', pauser = ? WHERE id = ? AND pause IS NULL").run(pauser, row.id);
    }
    return { ids: live.map((row) => row.id) };
  });
  if ("done" in first) return first.done;
  const ids = first.ids;
  const deadline = Date.now() + PAUSE_TIMEOUT_MS;
  for (;;) {
    // Another caller's change may release the writers before ours runs: ask again until they are all
    // paused at the moment our transaction looks.
    const attempt = transact(conn, (): { done: T } | null => {
      // A writer that died writes no more: its handle is forgotten (as liveHandles does), nothing waits for it.
      liveHandles(conn, `id IN (${ids.map(() => "?").join(", ")})`, ...ids);
      const states = ids.map((id) => statement(conn, "SELECT pause FROM handles WHERE id = ?").get(id) as { pause: string | null } | undefined);
      if (states.every((row) => !row || row.pause === "paused")) {
        const result = change();
        for (const id of ids) {
          // The writers will write the volume's (possibly new) top layer: say so before they even reload.
          statement(conn, "UPDATE handles SET write_layer = (SELECT top_layer FROM volumes WHERE volumes.id = handles.volume), pause = NULL, pauser = NULL WHERE id = ?").run(id);
        }
        return { done: result };
      }
      ids.forEach((id, i) => {
        if (states[i]?.pause === null) statement(conn, "UPDATE handles SET pause = 'requested', pauser = ? WHERE id = ?").run(pauser, id);
      });
      return null;
    });
    if (attempt) return attempt.done;
    if (Date.now() > deadline) {
      transact(conn, () => {
        for (const id of ids) statement(conn, "UPDATE handles SET pause = NULL, pauser = NULL WHERE id = ? AND pauser = ?").run(id, pauser);
      });
      throw invalid("datapath_not_pausing", `datapath did not pause within ${PAUSE_TIMEOUT_MS / 1000} s`);
    }
    await sleep(5);
  }
}
