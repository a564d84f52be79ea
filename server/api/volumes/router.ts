// Volumes of an SR: reads straight from the SR's plugin (SR.ls, Volume.stat, Volume.compare), every change
// through the toolstack's XenAPI on the user's session, as a task.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import {
  addVolumeKey,
  cloneVolume,
  copyVolume,
  createVolume,
  destroyVolume,
  listCopyTargets,
  removeVolumeKey,
  renameVolume,
  resizeVolume,
  revertVolume,
  setVolumeCbt,
  snapshotVolume,
} from "./change-volume.ts";
import { listVolumes } from "./list-volumes.ts";
import { compareVolumes, statVolume } from "./read-volume.ts";
import {
  ZAddVolumeKeySchema,
  ZCloneVolumeSchema,
  ZCompareVolumesResponse,
  ZCompareVolumesSchema,
  ZCopyTargetsResponse,
  ZCopyVolumeSchema,
  ZCreateVolumeSchema,
  ZListVolumesResponse,
  ZListVolumesSchema,
  ZRemoveVolumeKeySchema,
  ZRenameVolumeSchema,
  ZResizeVolumeSchema,
  ZSetCbtSchema,
  ZStatVolumeSchema,
  ZTaskStartedResponse,
  ZVolumeChangeResponse,
  ZVolumeRow,
  ZVolumeSchema,
} from "./schema.ts";

const change = authedProcedure.output(ZVolumeChangeResponse);

export const volumesRouter = createTRPCRouter({
  list: authedProcedure
    .input(ZListVolumesSchema)
    .output(ZListVolumesResponse)
    .query(({ ctx, input }) => listVolumes(ctx.xapi, ctx.pluginRoot, input.srRef)),
  stat: authedProcedure
    .input(ZStatVolumeSchema)
    .output(ZVolumeRow)
    .query(({ ctx, input }) => statVolume(ctx.xapi, ctx.pluginRoot, input)),
  compare: authedProcedure
    .input(ZCompareVolumesSchema)
    .output(ZCompareVolumesResponse)
    .query(({ ctx, input }) => compareVolumes(ctx.xapi, ctx.pluginRoot, input)),
  copyTargets: authedProcedure
    .input(ZListVolumesSchema)
    .output(ZCopyTargetsResponse)
    .query(({ ctx, input }) => listCopyTargets(ctx.xapi, input.srRef)),

  create: change.input(ZCreateVolumeSchema).mutation(({ ctx, input }) => createVolume(ctx.xapi, input)),
  resize: change.input(ZResizeVolumeSchema).mutation(({ ctx, input }) => resizeVolume(ctx.xapi, input)),
  snapshot: change.input(ZVolumeSchema).mutation(({ ctx, input }) => snapshotVolume(ctx.xapi, input)),
  clone: change.input(ZCloneVolumeSchema).mutation(({ ctx, input }) => cloneVolume(ctx.xapi, input)),
  revert: change.input(ZVolumeSchema).mutation(({ ctx, input }) => revertVolume(ctx.xapi, input)),
  destroy: change.input(ZVolumeSchema).mutation(({ ctx, input }) => destroyVolume(ctx.xapi, input)),
  rename: change.input(ZRenameVolumeSchema).mutation(({ ctx, input }) => renameVolume(ctx.xapi, input)),
  addKey: change.input(ZAddVolumeKeySchema).mutation(({ ctx, input }) => addVolumeKey(ctx.xapi, input)),
  removeKey: change.input(ZRemoveVolumeKeySchema).mutation(({ ctx, input }) => removeVolumeKey(ctx.xapi, input)),
  setCbt: change.input(ZSetCbtSchema).mutation(({ ctx, input }) => setVolumeCbt(ctx.xapi, input)),
  copy: authedProcedure
    .input(ZCopyVolumeSchema)
    .output(ZTaskStartedResponse)
    .mutation(({ ctx, input }) => copyVolume(ctx.xapi, input)),
});
