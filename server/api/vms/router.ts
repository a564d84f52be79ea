// VMs from the toolstack: the list with their drives, the drives' volumes, one VM's page, rename, description and destroy.
import "server-only";

import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { destroyVm, renameVm, setVmDescription } from "./change-vm.ts";
import { getVm, listVms, listVmVolumes } from "./list-vms.ts";
import {
  ZDestroyVmSchema,
  ZGetVmResponse,
  ZGetVmSchema,
  ZListVmsResponse,
  ZListVmVolumesResponse,
  ZRenameVmSchema,
  ZSetVmDescriptionSchema,
  ZVmChangeResponse,
} from "./schema.ts";

export const vmsRouter = createTRPCRouter({
  list: authedProcedure.output(ZListVmsResponse).query(({ ctx }) => listVms(ctx.xapi)),
  volumes: authedProcedure.output(ZListVmVolumesResponse).query(({ ctx }) => listVmVolumes(ctx.xapi)),
  get: authedProcedure
    .input(ZGetVmSchema)
    .output(ZGetVmResponse)
    .query(({ ctx, input }) => getVm(ctx.xapi, input.ref)),
  rename: authedProcedure
    .input(ZRenameVmSchema)
    .output(ZVmChangeResponse)
    .mutation(({ ctx, input }) => renameVm(ctx.xapi, input.ref, input.name)),
  setDescription: authedProcedure
    .input(ZSetVmDescriptionSchema)
    .output(ZVmChangeResponse)
    .mutation(({ ctx, input }) => setVmDescription(ctx.xapi, input.ref, input.description)),
  destroy: authedProcedure
    .input(ZDestroyVmSchema)
    .output(ZVmChangeResponse)
    .mutation(({ ctx, input }) => destroyVm(ctx.xapi, input.ref, input.keepDisks)),
});
