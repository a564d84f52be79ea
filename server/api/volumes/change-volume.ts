// Changes to volumes, each one XenAPI call on the user's session; the ones that take time run as tasks
// the console waits for (quick) or hands to the task page (a copy to another SR).
import "server-only";

import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { formatBytes } from "../../../lib/format.ts";
import { type XenApiClient, zInt64 } from "../../xenapi/client.ts";
import { runTask, srFreeSpace, startTask, uuidOfResult, vdiRefOf } from "./volume-tasks.ts";

type Change = { uuid: string | null; task: string };

function refuse(message: string): never {
  throw new TRPCError({ code: "BAD_REQUEST", message });
}

/** A size the SR cannot hold is refused before the toolstack is asked (when its free space is known). */
async function requireRoom(xapi: XenApiClient, srRef: string, bytes: number, what: string): Promise<void> {
  const free = await srFreeSpace(xapi, srRef);
  if (free !== null && bytes > free) refuse(`${what} needs ${formatBytes(bytes)} but the SR has only ${formatBytes(free)} free.`);
}

export async function createVolume(xapi: XenApiClient, input: { srRef: string; name: string; description: string; size: number }): Promise<Change> {
  await requireRoom(xapi, input.srRef, input.size, "The volume");
  const { task, result } = await runTask(xapi, "VDI.create", {
    SR: input.srRef,
    virtual_size: input.size,
    name_label: input.name,
    name_description: input.description,
    type: "user",
    sharable: false,
    read_only: false,
    other_config: {},
    sm_config: {},
  });
  return { uuid: await uuidOfResult(xapi, result), task };
}

export async function resizeVolume(xapi: XenApiClient, input: { srRef: string; uuid: string; size: number }): Promise<Change> {
  const vdi = await vdiRefOf(xapi, input.uuid);
  const current = await xapi.call(zInt64, "VDI.get_virtual_size", vdi);
  if (input.size <= current) refuse(`The new size must be larger than the current ${formatBytes(current)}: volumes can only grow.`);
  await requireRoom(xapi, input.srRef, input.size - current, "Growing the volume");
  const { task } = await runTask(xapi, "VDI.resize", vdi, input.size);
  return { uuid: input.uuid, task };
}

export async function snapshotVolume(xapi: XenApiClient, input: { uuid: string }): Promise<Change> {
  const { task, result } = await runTask(xapi, "VDI.snapshot", await vdiRefOf(xapi, input.uuid), {});
  return { uuid: await uuidOfResult(xapi, result), task };
}

/** A writable clone; named `name` when one is given (XenAPI's clone keeps the original's name). */
export async function cloneVolume(xapi: XenApiClient, input: { uuid: string; name?: string | undefined }): Promise<Change> {
  const { task, result } = await runTask(xapi, "VDI.clone", await vdiRefOf(xapi, input.uuid), {});
  const clone = z.string().parse(result);
  if (input.name !== undefined) await xapi.call(z.unknown(), "VDI.set_name_label", clone, input.name);
  return { uuid: await uuidOfResult(xapi, clone), task };
}

/** The snapshot's original gets the snapshot's contents (VDI.hangar_revert). */
export async function revertVolume(xapi: XenApiClient, input: { uuid: string }): Promise<Change> {
  const snapshot = await vdiRefOf(xapi, input.uuid);
  // Said in words here; the toolstack refuses the same (OPERATION_NOT_ALLOWED) should it change meanwhile.
  const record = await xapi.call(z.looseObject({ is_a_snapshot: z.boolean(), snapshot_of: z.string() }), "VDI.get_record", snapshot);
  if (!record.is_a_snapshot) refuse("Only a snapshot can be reverted to: this volume is not one.");
  if (record.snapshot_of === "OpaqueRef:NULL") refuse("The volume this snapshot was taken of no longer exists: there is nothing to revert.");
  const original = await xapi.call(z.string(), "VDI.get_uuid", record.snapshot_of);
  const { task } = await runTask(xapi, "VDI.hangar_revert", snapshot);
  return { uuid: original, task };
}

/** A copy to another SR moves data: it is started, and followed on the task page. */
export async function copyVolume(xapi: XenApiClient, input: { srRef: string; uuid: string; destSrRef: string }): Promise<{ task: string }> {
  if (input.destSrRef === input.srRef) refuse("Choose another SR to copy the volume to.");
  return { task: await startTask(xapi, "VDI.copy", await vdiRefOf(xapi, input.uuid), input.destSrRef) };
}

export async function destroyVolume(xapi: XenApiClient, input: { uuid: string }): Promise<Change> {
  const { task } = await runTask(xapi, "VDI.destroy", await vdiRefOf(xapi, input.uuid));
  return { uuid: null, task };
}

/** Name and description; only what changed is sent. */
export async function renameVolume(xapi: XenApiClient, input: { uuid: string; name: string; description: string }): Promise<Change> {
  const vdi = await vdiRefOf(xapi, input.uuid);
  const [name, description] = await Promise.all([
    xapi.call(z.string(), "VDI.get_name_label", vdi),
    xapi.call(z.string(), "VDI.get_name_description", vdi),
  ]);
  if (name !== input.name) await xapi.call(z.unknown(), "VDI.set_name_label", vdi, input.name);
  if (description !== input.description) await xapi.call(z.unknown(), "VDI.set_name_description", vdi, input.description);
  return { uuid: input.uuid, task: "" };
}

export async function addVolumeKey(xapi: XenApiClient, input: { uuid: string; key: string; value: string }): Promise<Change> {
  await xapi.call(z.unknown(), "VDI.add_to_other_config", await vdiRefOf(xapi, input.uuid), input.key, input.value);
  return { uuid: input.uuid, task: "" };
}

export async function removeVolumeKey(xapi: XenApiClient, input: { uuid: string; key: string }): Promise<Change> {
  await xapi.call(z.unknown(), "VDI.remove_from_other_config", await vdiRefOf(xapi, input.uuid), input.key);
  return { uuid: input.uuid, task: "" };
}

export async function setVolumeCbt(xapi: XenApiClient, input: { uuid: string; enabled: boolean }): Promise<Change> {
  await xapi.call(z.unknown(), input.enabled ? "VDI.enable_cbt" : "VDI.disable_cbt", await vdiRefOf(xapi, input.uuid));
  return { uuid: input.uuid, task: "" };
}

const ZSrTarget = z.looseObject({
  name_label: z.string(),
  type: z.string(),
  physical_size: zInt64,
  physical_utilisation: zInt64,
  PBDs: z.array(z.string()),
});

/** The SRs a volume of `srRef` can be copied to: every other attached SR, the pool's default first. */
export async function listCopyTargets(xapi: XenApiClient, srRef: string) {
  const [srs, pbds, pools] = await Promise.all([
    xapi.records("SR", ZSrTarget),
    xapi.records("PBD", z.looseObject({ currently_attached: z.boolean() })),
    xapi.records("pool", z.looseObject({ default_SR: z.string() })),
  ]);
  const defaultSr = Object.values(pools)[0]?.default_SR;
  return Object.entries(srs)
    .filter(([ref, sr]) => ref !== srRef && sr.PBDs.some((pbd) => pbds[pbd]?.currently_attached === true))
    .map(([ref, sr]) => ({
      ref,
      name: sr.name_label,
      type: sr.type,
      freeSpace: sr.physical_size > 0 ? Math.max(0, sr.physical_size - sr.physical_utilisation) : null,
      isDefault: ref === defaultSr,
    }))
    .sort((a, b) => Number(b.isDefault) - Number(a.isDefault) || a.name.localeCompare(b.name));
}
