// A plugin call that makes a volume (Volume.create, .snapshot, .clone, .copy) may commit just before the toolstack
// dies, and the answer naming the new volume is then lost with it: the volume would stay as a plain VDI nobody
// asked for. So the toolstack writes an intent before such a call, adds the new key as soon as the answer comes,
// and removes the intent once the call it serves is done. An intent still there at the next start is an
// interrupted call: its volume is destroyed. When the key never arrived, the volume is found as the one the SR
// lists that no listing has seen and that carries no toolstack keys (every volume the toolstack finishes has its
// `vdi-type`); if there are more such volumes than interrupted calls on that SR, none is taken (they may be
// someone else's) and that is logged.
//
// The spawner stops a dead toolstack's plugin calls at once (spawner-process.ts), so none commits after the next
// start has looked.
import { randomUUID } from "node:crypto";
import type { Volume } from "../storage/types.ts";
import { KEYS } from "../xenapi/vdi-identity.ts";
import type { Queryable } from "./db/database.ts";
import { type AttachedSr, attachedSr, DBG } from "./srs.ts";
import type { Toolstack } from "./toolstack.ts";
import { announceChanges } from "./vdi-records.ts";

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Runs `make` (the plugin call that makes a volume on `sr`) and then `finish` (what makes the call done: keys set,
 * the VDI remembered), under an intent that the next start undoes if the service dies before `finish` returns.
 * Answers what `finish` answers.
 */
export async function makeVolume<V extends Pick<Volume, "key">, T>(ts: Toolstack, sr: AttachedSr, make: () => Promise<V>, finish: (volume: V) => Promise<T>): Promise<T> {
  const id = await openIntent(ts, sr);
  try {
    const volume = await named(ts, id, make);
    return await finish(volume);
  } finally {
    await ts.db.run("DELETE FROM volume_intents WHERE id = ?", [id]);
  }
}

/**
 * Runs `make` under an intent, then `handOver` in the transaction that removes it: the new volume passes to an
 * owner that undoes it itself (a task's state), never to both or neither.
 */
export async function handOverVolume<V extends Pick<Volume, "key">>(ts: Toolstack, sr: AttachedSr, make: () => Promise<V>, handOver: (volume: V, tx: Queryable) => Promise<void>): Promise<V> {
  const id = await openIntent(ts, sr);
  let volume: V | undefined;
  try {
    volume = await named(ts, id, make);
  } finally {
    // Made and handed over, or not made: either way the intent goes, with the hand-over when there is one.
    await ts.db.transaction(async (tx) => {
      if (volume !== undefined) await handOver(volume, tx);
      await tx.run("DELETE FROM volume_intents WHERE id = ?", [id]);
    });
  }
  return volume;
}

async function openIntent(ts: Toolstack, sr: AttachedSr): Promise<string> {
  const id = randomUUID();
  await ts.db.run("INSERT INTO volume_intents (id, host_ref, sr_ref, volume_key, started) VALUES (?, ?, ?, NULL, ?)", [id, ts.host.ref, sr.ref, new Date().toISOString()]);
  return id;
}

/** The plugin's answer, its key written to the intent at once. */
async function named<V extends Pick<Volume, "key">>(ts: Toolstack, id: string, make: () => Promise<V>): Promise<V> {
  const volume = await make();
  await ts.db.run("UPDATE volume_intents SET volume_key = ? WHERE id = ?", [volume.key, id]);
  return volume;
}

interface Intent {
  id: string;
  sr_ref: string;
  volume_key: string | null;
}

/** At start, before anything lists an SR: the volumes of calls a previous run of this host was killed in go. */
export async function recoverVolumeIntents(ts: Toolstack): Promise<void> {
  const intents = await ts.db.all<Intent>("SELECT id, sr_ref, volume_key FROM volume_intents WHERE host_ref = ?", [ts.host.ref]);
  const bySr = Map.groupBy(intents, (intent) => intent.sr_ref);
  for (const [srRef, srIntents] of bySr) {
    try {
      const removed = await undoIntents(ts, await attachedSr(ts, srRef), srIntents);
      if (removed > 0) await announceChanges(ts, srRef);
    } catch (error) {
      console.error(`the volumes of calls interrupted on SR ${srRef} could not be looked for: ${message(error)}`);
    }
    for (const { id } of srIntents) await ts.db.run("DELETE FROM volume_intents WHERE id = ?", [id]);
  }
}

/** Destroys the volumes `intents` (all of one SR) made; answers how many went. */
async function undoIntents(ts: Toolstack, sr: AttachedSr, intents: Intent[]): Promise<number> {
  const volumes = await sr.plugin.client.call("SR.ls", { dbg: DBG, sr: sr.uri });
  const present = new Set(volumes.map((volume) => volume.key));
  const doomed = intents.flatMap((intent) => (intent.volume_key !== null && present.has(intent.volume_key) ? [intent.volume_key] : []));
  const unnamed = intents.filter((intent) => intent.volume_key === null).length;
  if (unnamed > 0) {
    const seen = new Set((await ts.db.all<{ volume_key: string }>("SELECT volume_key FROM vdi_locations WHERE sr_ref = ?", [sr.ref])).map((row) => row.volume_key));
    const unfinished = volumes.filter((volume) => !seen.has(volume.key) && volume.keys[KEYS.type] === undefined && !doomed.includes(volume.key));
    if (unfinished.length <= unnamed) doomed.push(...unfinished.map((volume) => volume.key));
    else console.error(`SR ${sr.ref}: ${unnamed} volume-making call(s) were interrupted and ${unfinished.length} new volumes have no toolstack keys; none removed, as which are theirs is unknown`);
  }
  let removed = 0;
  for (const key of doomed) {
    try {
      await sr.plugin.client.call("Volume.destroy", { dbg: DBG, sr: sr.uri, key });
      removed++;
    } catch (error) {
      console.error(`removing volume ${key} of SR ${sr.ref}, made by a call the service was killed in: ${message(error)}`);
    }
  }
  return removed;
}
