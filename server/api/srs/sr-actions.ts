// The changes of an existing SR, each one or more toolstack tasks: default SR, attach (PBD.plug), detach
// (PBD.unplug), forget (SR.forget, optionally after a detach) and destroy (SR.destroy: its volumes go too).
import "server-only";

import { TRPCError } from "@trpc/server";
import type { XenApiClient } from "../../xenapi/client.ts";
import { readPool, ZPbdRecord, ZSrRecord } from "./records.ts";
import { runTask } from "./run-task.ts";
import type { TSrActionResponse } from "./schema.ts";

async function pbdsOf(xapi: XenApiClient, sr: string) {
  const record = await xapi.call(ZSrRecord, "SR.get_record", sr);
  const pbds = await Promise.all(record.PBDs.map(async (ref) => ({ ref, ...(await xapi.call(ZPbdRecord, "PBD.get_record", ref)) })));
  return { record, pbds };
}

export async function setDefaultSr(xapi: XenApiClient, sr: string): Promise<TSrActionResponse> {
  await xapi.call(ZSrRecord.pick({ uuid: true }), "SR.get_record", sr);
  const pool = await readPool(xapi);
  return { tasks: [(await runTask(xapi, "pool.set_default_SR", pool.ref, sr)).task] };
}

export async function attachSr(xapi: XenApiClient, sr: string): Promise<TSrActionResponse> {
  const { record, pbds } = await pbdsOf(xapi, sr);
  if (pbds.length === 0) {
    throw new TRPCError({ code: "PRECONDITION_FAILED", message: `The SR "${record.name_label}" has no PBD on this host: it cannot be attached from here.` });
  }
  const tasks: string[] = [];
  for (const pbd of pbds.filter((p) => !p.currently_attached)) tasks.push((await runTask(xapi, "PBD.plug", pbd.ref)).task);
  return { tasks };
}

export async function detachSr(xapi: XenApiClient, sr: string): Promise<TSrActionResponse> {
  const { pbds } = await pbdsOf(xapi, sr);
  const tasks: string[] = [];
  for (const pbd of pbds.filter((p) => p.currently_attached)) tasks.push((await runTask(xapi, "PBD.unplug", pbd.ref)).task);
  return { tasks };
}

export async function forgetSr(xapi: XenApiClient, sr: string, detachFirst: boolean): Promise<TSrActionResponse> {
  const detached = detachFirst ? (await detachSr(xapi, sr)).tasks : [];
  // Without detachFirst an attached SR fails with SR_HAS_PBD, in words.
  return { tasks: [...detached, (await runTask(xapi, "SR.forget", sr)).task] };
}

export async function destroySr(xapi: XenApiClient, sr: string): Promise<TSrActionResponse> {
  return { tasks: [(await runTask(xapi, "SR.destroy", sr)).task] };
}
