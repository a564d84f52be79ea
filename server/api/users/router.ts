// Users and roles: local users, the directory's users and groups as subjects, each with one role; the
// directory's settings; a user's own password. The toolstack refuses what the caller's role does not allow.
import "server-only";

import { z } from "zod";
import { authedProcedure, createTRPCRouter } from "../trpc.ts";
import { addDirectorySubject, createLocalUser, directoryConfig, listUsers, setRole, thePool } from "./manage-users.ts";
import {
  ZAddDirectorySubjectSchema,
  ZChangeOwnPasswordSchema,
  ZCreateLocalUserSchema,
  ZDirectorySettingsSchema,
  ZListUsersResponse,
  ZMessageResponse,
  ZOkResponse,
  ZResetPasswordSchema,
  ZSetDisabledSchema,
  ZSetRoleSchema,
  ZSubjectRefSchema,
} from "./schema.ts";

const ok = { ok: true as const };

export const usersRouter = createTRPCRouter({
  list: authedProcedure.output(ZListUsersResponse).query(({ ctx }) => listUsers(ctx.xapi, ctx.session)),
  createLocal: authedProcedure
    .input(ZCreateLocalUserSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await createLocalUser(ctx.xapi, input);
      return ok;
    }),
  addDirectorySubject: authedProcedure
    .input(ZAddDirectorySubjectSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await addDirectorySubject(ctx.xapi, input);
      return ok;
    }),
  setRole: authedProcedure
    .input(ZSetRoleSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await setRole(ctx.xapi, input.subject, input.role);
      return ok;
    }),
  resetPassword: authedProcedure
    .input(ZResetPasswordSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await ctx.xapi.call(z.unknown(), "subject.hangar_set_password", input.subject, input.password);
      return ok;
    }),
  setDisabled: authedProcedure
    .input(ZSetDisabledSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await ctx.xapi.call(z.unknown(), "subject.hangar_set_disabled", input.subject, input.disabled);
      return ok;
    }),
  remove: authedProcedure
    .input(ZSubjectRefSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await ctx.xapi.call(z.unknown(), "subject.destroy", input.subject);
      return ok;
    }),
  changeOwnPassword: authedProcedure
    .input(ZChangeOwnPasswordSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await ctx.xapi.call(z.unknown(), "session.change_password", input.old, input.new);
      return ok;
    }),
  testDirectory: authedProcedure
    .input(ZDirectorySettingsSchema)
    .output(ZMessageResponse)
    .mutation(async ({ ctx, input }) => ({ message: await ctx.xapi.call(z.string(), "pool.hangar_test_external_auth", await thePool(ctx.xapi), directoryConfig(input)) })),
  enableDirectory: authedProcedure
    .input(ZDirectorySettingsSchema)
    .output(ZOkResponse)
    .mutation(async ({ ctx, input }) => {
      await ctx.xapi.call(z.unknown(), "pool.enable_external_auth", await thePool(ctx.xapi), directoryConfig(input), input.serviceName, "LDAP");
      return ok;
    }),
  disableDirectory: authedProcedure
    .output(ZOkResponse)
    .mutation(async ({ ctx }) => {
      await ctx.xapi.call(z.unknown(), "pool.disable_external_auth", await thePool(ctx.xapi), {});
      return ok;
    }),
});
