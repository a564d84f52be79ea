// The plugins found in the plugin root: what each declares (Plugin.query) and the features the toolstack
// derives, which were skipped and why, and Plugin.diagnostics on demand. Every call rescans the root: the console keeps no registry of its own.
import "server-only";

import { TRPCError } from "@trpc/server";
import { scanPluginRoot, type PluginRegistry } from "../../storage/registry.ts";
import { toTRPCError } from "../storage-error.ts";
import { createTRPCRouter, authedProcedure } from "../trpc.ts";
import {
  ZGetPluginDiagnosticsResponse,
  ZGetPluginDiagnosticsSchema,
  ZListPluginsResponse,
  type TListPluginsResponse,
} from "./schema.ts";

export const pluginsRouter = createTRPCRouter({
  list: authedProcedure.output(ZListPluginsResponse).query(async ({ ctx }) => describeRegistry(await scan(ctx.pluginRoot))),

  diagnostics: authedProcedure
    .input(ZGetPluginDiagnosticsSchema)
    .output(ZGetPluginDiagnosticsResponse)
    .query(async ({ ctx, input }) => {
      const plugin = (await scan(ctx.pluginRoot)).find(input.name, input.kind);
      if (plugin === undefined) {
        const what = input.kind === undefined ? "plugin" : `${input.kind} plugin`;
        throw new TRPCError({ code: "NOT_FOUND", message: `No registered ${what} is named '${input.name}' in ${ctx.pluginRoot}` });
      }
      try {
        const diagnostics = await plugin.client.call("Plugin.diagnostics", { dbg: "hangar-console" });
        return { name: plugin.type, diagnostics };
      } catch (error) {
        throw toTRPCError(error, `Plugin.diagnostics on '${plugin.type}'`);
      }
    }),
});

async function scan(root: string): Promise<PluginRegistry> {
  try {
    return await scanPluginRoot(root);
  } catch (error) {
    throw toTRPCError(error, `Scanning the plugin root ${root}`);
  }
}

function describeRegistry(registry: PluginRegistry): TListPluginsResponse {
  return {
    root: registry.root,
    plugins: registry.plugins.map(({ kind, dir, type, query, features, declaredFeatures, derivedFeatures, warnings }) => ({
      kind,
      dir,
      type,
      name: query.name,
      description: query.description,
      vendor: query.vendor,
      copyright: query.copyright,
      version: query.version,
      required_api_version: query.required_api_version,
      features,
      declaredFeatures,
      derivedFeatures,
      configuration: query.configuration,
      required_cluster_stack: query.required_cluster_stack,
      warnings,
    })),
    skipped: registry.skipped.map(({ kind, dir, path, reason }) => ({ kind, dir, path, reason })),
  };
}
