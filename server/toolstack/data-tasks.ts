// Long data work as XenAPI tasks: VDI.copy between SRs, Hangar's copy and mirror of a VDI to a remote
// NBD export, and its mirror into an existing volume. Each runs the datapath's Data.copy / Data.mirror,
// follows Data.stat into the task's progress, answers task.cancel with Data.cancel, and in every outcome
// forgets the operation (Data.destroy), unplugs what it plugged and, when a copy did not succeed, destroys
// the half-made destination.
//
// The task's other_config remembers each step (DataTaskState), so after the service is killed the next run
// takes the task over (recoverDataTask): an operation still running in the plugin's daemon is followed to
// its end; anything else fails the task with the reason, and is cleaned up as above.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { findScript } from "../storage/exec-transport.ts";
import { ENDPOINT_FILE, type RegisteredPlugin } from "../storage/registry.ts";
import { StorageError } from "../storage/errors.ts";
import type { Blocklist, Volume } from "../storage/types.ts";
import { type Attachment, plug, unplug } from "./datapath-session.ts";
import { objectErrors } from "./object-errors.ts";
import { type AttachedSr, attachedSr, DBG, hasFeature, requireLocal } from "./srs.ts";
import { LeftToNextStart, TASK_KIND_KEY, type TaskControl } from "./tasks.ts";
import type { Toolstack } from "./toolstack.ts";
import { announceChanges, fieldKeys, type LocatedVdi, markOperation, rememberVdi, setVolumeKeys, volumeFields } from "./vdi-records.ts";
import { handOverVolume, makeVolume } from "./volume-intents.ts";
import type { Queryable } from "./db/database.ts";
import { vdiRef } from "../xenapi/vdi-identity.ts";
import type { XenApiError } from "../xenapi/errors.ts";
import type { XenRecord, XenValue } from "../xenapi/values.ts";

/** The task kind (other_config[TASK_KIND_KEY]) whose recovery is recoverDataTask. */
export const DATA_TASK_KIND = "data-operation";
const STATE_KEY = "hangar:data-operation";
const POLL_MS = 500;
/** Data.stat failures in a row before the operation is taken as lost. */
const STAT_ATTEMPTS = 3;
/** How long a clean-up waits for a cancelled operation to stop before forgetting it anyway. */
const CANCEL_WAIT_MS = 30_000;
const COPY_BLOCK = 64 * 1024;

const ZAttachment = z.object({ uri: z.string(), domain: z.string(), mode: z.enum(["ro", "rw", "none"]) });
const ZState = z.object({
  what: z.enum(["vdi-copy", "data-copy", "data-mirror"]),
  /** The VDI read or mirrored. */
  vdi: z.string(),
  /** Its name and size when the task began: a finished task reads without asking for its volumes. */
  name: z.string().optional(),
  size: z.number().optional(),
  attachments: z.array(ZAttachment),
  /** VDI.copy: the volume being filled, destroyed unless the copy succeeds. */
  destination: z.object({ sr: z.string(), key: z.string() }).optional(),
  /** VDI.hangar_data_mirror_to_vdi: the existing VDI written into (marked busy, never destroyed). */
  into: z.string().optional(),
  into_name: z.string().optional(),
  /** The operation, and the datapath URI it runs on (its scheme names the plugin). */
  operation: z.object({ uri: z.string(), id: z.tuple([z.enum(["CopyV1", "MirrorV1"]), z.string()]) }).optional(),
});
type DataTaskState = z.infer<typeof ZState>;

const save = (control: TaskControl, state: DataTaskState, tx?: Queryable) => control.remember(STATE_KEY, JSON.stringify(state), tx);

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** What the task works on, in words, as its name_description: pages of tasks find it by its volumes' names. */
async function describe(ts: Toolstack, control: TaskControl, text: string): Promise<void> {
  await ts.objects.set("task", control.ref, { name_description: text });
}

/** Every block of a disk of `size` bytes. */
function wholeDisk(size: number): Blocklist {
  return { blocksize: COPY_BLOCK, ranges: [[0, Math.ceil(size / COPY_BLOCK)]] };
}

/** Whether a datapath plugin runs Data.copy: a script plugin needs the script; a daemon has none to look for. */
async function offersDataCopy(plugin: RegisteredPlugin): Promise<boolean> {
  if (existsSync(join(plugin.path, ENDPOINT_FILE))) return true;
  return findScript(plugin.path, "Data.copy", plugin.dir).then(
    () => true,
    () => false,
  );
}

/** Why a data operation failed: Data.stat has no field for it, so the datapath's diagnostics line naming it. */
async function failureReason(plugin: RegisteredPlugin, id: string): Promise<string> {
  try {
    const diagnostics = await plugin.client.call("Plugin.diagnostics", { dbg: DBG });
    const line = diagnostics.split("\n").find((l) => l.includes(id));
    if (line !== undefined) return line.trim();
  } catch (error) {
    return `the operation failed; Plugin.diagnostics failed too: ${message(error)}`;
  }
  return "the operation failed; the datapath's diagnostics say no more";
}

async function failure(ts: Toolstack, state: DataTaskState, reason: string): Promise<XenApiError> {
  if (state.what === "data-mirror") return objectErrors.mirrorFailed(state.vdi, reason);
  // The datapath knows the destination of a VDI.copy only as a remote: say which volume it is.
  if (state.destination === undefined) return objectErrors.vdiCopyFailed(reason);
  const { sr: srRef, key } = state.destination;
  const sr = await ts.objects.find("SR", srRef).catch(() => undefined);
  const where = sr === undefined ? `SR ${srRef}` : `SR "${String(sr.record.name_label)}" (${String(sr.record.uuid)})`;
  return objectErrors.vdiCopyFailed(`the copy into volume ${key} on ${where} failed: ${reason}`);
}

/** Follows the operation until it is complete: progress into the task, task.cancel as Data.cancel. */
async function follow(ts: Toolstack, control: TaskControl, state: DataTaskState): Promise<void> {
  const { uri, id: operation } = state.operation!;
  const { plugin } = await ts.storage.datapathFor([uri]);
  let cancelSent = false;
  for (let failures = 0; ; ) {
    // The service stops: the operation goes on in its daemon, for the next start to follow.
    if (control.stopping.aborted) throw new LeftToNextStart();
    if (control.signal.aborted && !cancelSent) {
      cancelSent = true;
      await plugin.client.call("Data.cancel", { dbg: DBG, operation }).catch((error: unknown) => console.error(`Data.cancel ${operation[1]}: ${message(error)}`));
    }
    try {
      const status = await plugin.client.call("Data.stat", { dbg: DBG, operation });
      failures = 0;
      if (status.progress !== undefined) control.progress(status.progress);
      if (status.complete) {
        control.signal.throwIfAborted();
        if (status.failed) throw await failure(ts, state, await failureReason(plugin, operation[1]));
        return;
      }
    } catch (error) {
      // A plugin call that failed (not the operation) is tried again a few times: a busy host is no failure.
      if (!(error instanceof StorageError) || ++failures >= STAT_ATTEMPTS) throw error;
    }
    await sleep(POLL_MS, undefined, { signal: AbortSignal.any([control.signal, control.stopping]) }).catch(() => undefined);
  }
}

/**
 * Forgets the operation (stopping it first if it still runs), unplugs, and on failure removes the
 * destination. Each step is done once: what is done leaves the state.
 */
async function cleanUp(ts: Toolstack, state: DataTaskState, failed: boolean): Promise<void> {
  if (state.operation !== undefined) {
    const { uri, id: operation } = state.operation;
    try {
      const { plugin } = await ts.storage.datapathFor([uri]);
      const stat = () => plugin.client.call("Data.stat", { dbg: DBG, operation });
      if (!(await stat()).complete) {
        await plugin.client.call("Data.cancel", { dbg: DBG, operation });
        for (const deadline = Date.now() + CANCEL_WAIT_MS; !(await stat()).complete && Date.now() < deadline; ) await sleep(POLL_MS);
      }
      await plugin.client.call("Data.destroy", { dbg: DBG, operation });
    } catch (error) {
      console.error(`forgetting data operation ${operation[1]}: ${message(error)}`);
    }
    state.operation = undefined;
  }
  for (const attachment of state.attachments.reverse()) await unplug(ts, attachment);
  state.attachments = [];
  if (failed && state.destination !== undefined) {
    const { sr: srRef, key } = state.destination;
    try {
      const sr = await attachedSr(ts, srRef);
      await sr.plugin.client.call("Volume.destroy", { dbg: DBG, sr: sr.uri, key });
      await announceChanges(ts, srRef);
    } catch (error) {
      console.error(`removing the half-made copy ${key} in SR ${srRef}: ${message(error)}`);
    }
    state.destination = undefined;
  }
}

/**
 * Runs `setup` (which starts the operation; `busy` marks a VDI it makes as worked on), follows the
 * operation, cleans up in every outcome, and runs `done` after a success. A cancel that comes after the
 * work is done still cancels (the task ends cancelled, so nothing of it may stay): the last check is after
 * the last await.
 */
async function seeThrough(
  ts: Toolstack,
  control: TaskControl,
  state: DataTaskState,
  setup: (busy: (vdi: string) => void) => Promise<void>,
  done: () => Promise<void> = async () => {},
): Promise<void> {
  const operation = state.what === "data-mirror" ? "mirror" : "copy";
  const releases: Array<() => void> = [];
  const busy = (vdi: string) => releases.push(markOperation(ts, [vdi], control.ref, operation));
  busy(state.vdi);
  if (state.into !== undefined) busy(state.into);
  try {
    // A recovered copy's destination is known from the start.
    if (state.destination !== undefined) busy(vdiRef((await attachedSr(ts, state.destination.sr)).uuid, state.destination.key));
    await setup(busy);
    if (state.operation === undefined) throw objectErrors.taskInterrupted(control.ref, "the service restarted before the data operation started");
    await follow(ts, control, state);
    await cleanUp(ts, state, false);
    // Released before `done` announces the result, so that its records show no operation running.
    for (const release of releases) release();
    await done();
    control.signal.throwIfAborted();
  } catch (error) {
    // Left to the next start (the service stops): nothing is undone, the next start follows the operation.
    if (!(error instanceof LeftToNextStart)) await cleanUp(ts, state, true);
    throw error;
  } finally {
    for (const release of releases) release();
  }
}

/**
 * VDI.copy to an SR: blockwise through the datapaths (a new volume plugged read-write as an NBD export,
 * Data.copy from the source plugged read-only) when the source's datapath runs Data.copy; else Volume.copy
 * when both SRs have the same plugin and it declares VDI_COPY. Answers the new VDI's ref.
 */
export async function copyVdi(ts: Toolstack, control: TaskControl, source: LocatedVdi, dest: AttachedSr): Promise<string> {
  await requireLocal(ts, source.sr);
  await requireLocal(ts, dest);
  const volume = await source.sr.plugin.client.call("Volume.stat", { dbg: DBG, sr: source.sr.uri, key: source.key });
  const { plugin: datapath, uri } = await ts.storage.datapathFor(volume.uri);
  if (!(await offersDataCopy(datapath))) return copyVolume(ts, source, dest, volume);
  await control.remember(TASK_KIND_KEY, DATA_TASK_KIND);
  const destName = String((await ts.objects.find("SR", dest.ref))?.record.name_label ?? dest.uuid);
  await describe(ts, control, `Copy of volume “${volume.name}” to SR “${destName}”`);
  const state: DataTaskState = { what: "vdi-copy", vdi: source.ref, name: volume.name, size: volume.virtual_size, attachments: [] };
  let created: Volume | undefined;
  let result: string | undefined;
  await seeThrough(
    ts,
    control,
    state,
    async (busy) => {
      const create = () =>
        dest.plugin.client.call("Volume.create", {
          dbg: DBG,
          sr: dest.uri,
          name: volume.name,
          description: volume.description,
          size: volume.virtual_size,
          sharable: volume.sharable,
        });
      // From the moment the task's state names the destination, the task's own recovery undoes it.
      created = await handOverVolume(ts, dest, create, async (made, tx) => {
        state.destination = { sr: dest.ref, key: made.key };
        busy(vdiRef(dest.uuid, made.key));
        await save(control, state, tx);
      });
      await setVolumeKeys(dest, created.key, fieldKeys(volumeFields(volume)), { undo: false });
      await announceChanges(ts, dest.ref);
      const domain = `hangar-${randomUUID()}`;
      const writer: Attachment = { uri: (await ts.storage.datapathFor(created.uri)).uri, domain, mode: "rw" };
      state.attachments.push(writer);
      await save(control, state);
      const nbd = (await plug(ts, writer)).find((implementation) => implementation[0] === "Nbd");
      if (nbd === undefined || nbd[0] !== "Nbd") throw objectErrors.vdiCopyFailed(`the datapath of ${dest.type} volumes offers no NBD export to copy into`);
      const reader: Attachment = { uri, domain, mode: "ro" };
      state.attachments.push(reader);
      await save(control, state);
      await plug(ts, reader);
      const id = await datapath.client.call("Data.copy", { dbg: DBG, uri, domain, remote: nbd[1].uri, blocklist: wholeDisk(volume.virtual_size) });
      state.operation = { uri, id };
      await save(control, state);
    },
    async () => {
      await announceChanges(ts, dest.ref, { modified: [vdiRef(dest.uuid, created!.key)] });
      result = await rememberVdi(ts, dest, created!);
    },
  );
  return result!;
}

/** The volume-level copy: one Volume.copy call (no progress, no cancel), for plugins without Data.copy. */
async function copyVolume(ts: Toolstack, source: LocatedVdi, dest: AttachedSr, volume: Volume): Promise<string> {
  if (source.sr.plugin.dir !== dest.plugin.dir || !hasFeature(source.sr.plugin, "VDI_COPY")) {
    throw objectErrors.vdiCopyFailed(`the ${source.sr.type} datapath has no Data.copy, and Volume.copy needs both SRs of one plugin declaring VDI_COPY`);
  }
  const copy = () => source.sr.plugin.client.call("Volume.copy", { dbg: DBG, sr: source.sr.uri, key: source.key, dest_sr: dest.uri });
  return makeVolume(ts, dest, copy, async (copied) => {
    await setVolumeKeys(dest, copied.key, fieldKeys(volumeFields(volume)), { undo: true });
    await announceChanges(ts, dest.ref);
    return rememberVdi(ts, dest, copied);
  });
}

/** Hangar's VDI.hangar_data_copy / hangar_data_mirror: the VDI's data to a remote NBD URI. */
export async function dataToRemote(ts: Toolstack, control: TaskControl, source: LocatedVdi, remote: string, what: "data-copy" | "data-mirror"): Promise<void> {
  await requireLocal(ts, source.sr);
  const volume = await source.sr.plugin.client.call("Volume.stat", { dbg: DBG, sr: source.sr.uri, key: source.key });
  const { plugin: datapath, uri } = await ts.storage.datapathFor(volume.uri);
  await control.remember(TASK_KIND_KEY, DATA_TASK_KIND);
  await describe(ts, control, `${what === "data-mirror" ? "Mirror" : "Copy"} of volume “${volume.name}” to ${remote}`);
  const state: DataTaskState = { what, vdi: source.ref, name: volume.name, size: volume.virtual_size, attachments: [] };
  await seeThrough(ts, control, state, async () => {
    // A mirror needs the volume attached (its writes go through the datapath); a copy reads it read-only.
    const attachment: Attachment = { uri, domain: `hangar-${randomUUID()}`, mode: what === "data-mirror" ? "none" : "ro" };
    state.attachments.push(attachment);
    await save(control, state);
    await plug(ts, attachment);
    const { domain } = attachment;
    const id =
      what === "data-mirror"
        ? await datapath.client.call("Data.mirror", { dbg: DBG, uri, domain, remote })
        : await datapath.client.call("Data.copy", { dbg: DBG, uri, domain, remote, blocklist: wholeDisk(volume.virtual_size) });
    state.operation = { uri, id };
    await save(control, state);
  });
}

/**
 * Hangar's VDI.hangar_data_mirror_to_vdi: the VDI's writes mirrored into an existing volume (of another SR,
 * typically), plugged read-write under the task's own domain as the NBD export Data.mirror writes to.
 */
export async function mirrorToVdi(ts: Toolstack, control: TaskControl, source: LocatedVdi, dest: LocatedVdi): Promise<void> {
  await requireLocal(ts, source.sr);
  await requireLocal(ts, dest.sr);
  const [volume, target] = await Promise.all([
    source.sr.plugin.client.call("Volume.stat", { dbg: DBG, sr: source.sr.uri, key: source.key }),
    dest.sr.plugin.client.call("Volume.stat", { dbg: DBG, sr: dest.sr.uri, key: dest.key }),
  ]);
  if (target.virtual_size < volume.virtual_size) {
    throw objectErrors.mirrorFailed(source.ref, `the destination volume (${target.virtual_size} bytes) is smaller than the source (${volume.virtual_size} bytes)`);
  }
  const { plugin: datapath, uri } = await ts.storage.datapathFor(volume.uri);
  const { uri: targetUri } = await ts.storage.datapathFor(target.uri);
  await control.remember(TASK_KIND_KEY, DATA_TASK_KIND);
  await describe(ts, control, `Mirror of volume “${volume.name}” into volume “${target.name}”`);
  const state: DataTaskState = { what: "data-mirror", vdi: source.ref, name: volume.name, size: volume.virtual_size, into: dest.ref, into_name: target.name, attachments: [] };
  await seeThrough(ts, control, state, async () => {
    const domain = `hangar-${randomUUID()}`;
    const writer: Attachment = { uri: targetUri, domain, mode: "rw" };
    state.attachments.push(writer);
    await save(control, state);
    const nbd = (await plug(ts, writer)).find((implementation) => implementation[0] === "Nbd");
    if (nbd === undefined || nbd[0] !== "Nbd") throw objectErrors.mirrorFailed(source.ref, `the datapath of ${dest.sr.type} volumes offers no NBD export to mirror into`);
    // A mirror needs the source attached (its writes go through the datapath), not activated.
    const reader: Attachment = { uri, domain, mode: "none" };
    state.attachments.push(reader);
    await save(control, state);
    await plug(ts, reader);
    const id = await datapath.client.call("Data.mirror", { dbg: DBG, uri, domain, remote: nbd[1].uri });
    state.operation = { uri, id };
    await save(control, state);
  });
}

/** The task recovery of DATA_TASK_KIND: the task is run again from its remembered state. */
export async function recoverDataTask(ts: Toolstack, ref: string, record: XenRecord): Promise<void> {
  const text = (record.other_config as Record<string, string> | undefined)?.[STATE_KEY];
  const parsed = text === undefined ? undefined : ZState.safeParse(JSON.parse(text));
  if (parsed === undefined || !parsed.success) throw objectErrors.taskInterrupted(ref, "the service restarted before the task recorded its state");
  const state = parsed.data;
  // A cancel asked for before the restart is asked again of the new run: pending, then task.cancel.
  const cancelling = record.status === "cancelling";
  if (cancelling) await ts.objects.set("task", ref, { status: "pending" });
  void ts.tasks.run(ref, async (control) => {
    let result: string | undefined;
    // An operation the plugin no longer knows fails in Data.stat: the task then fails with that reason.
    await seeThrough(ts, control, state, async () => {}, async () => {
      const destination = state.destination;
      if (state.what !== "vdi-copy" || destination === undefined) return;
      const sr = await attachedSr(ts, destination.sr);
      await announceChanges(ts, sr.ref, { modified: [vdiRef(sr.uuid, destination.key)] });
      result = await rememberVdi(ts, sr, { key: destination.key });
    });
    return result;
  });
  if (cancelling) await ts.tasks.cancel(ref);
}

/**
 * Runs long work in the call's task (an `Async.` call), or else in a task of its own that the call waits
 * for: a plain VDI.copy is then a task too, with progress and restart recovery (xapi gives every call one).
 */
export async function inTask<T extends XenValue>(ts: Toolstack, task: TaskControl | undefined, name: string, work: (control: TaskControl) => Promise<T>): Promise<T> {
  if (task !== undefined) return work(task);
  return new Promise<T>((resolve, reject) => {
    ts.tasks
      .start(name, (control) =>
        work(control).then(
          (result) => (resolve(result), result),
          (error: unknown) => {
            reject(error);
            throw error;
          },
        ),
      )
      .catch(reject);
  });
}
