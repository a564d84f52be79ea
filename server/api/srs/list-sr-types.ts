// The SR types one can create: the toolstack's supported types (SR.get_supported_types), described by the
// volume plugins of the console's plugin root (Plugin.query: name, configuration keys, features).
import "server-only";

import { z } from "zod";
import { featureName, type RegisteredPlugin } from "../../storage/registry.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { pluginRegistry } from "../storage-access.ts";
import { toTRPCError } from "../storage-error.ts";
import type { TListSrTypesResponse, TSrType } from "./schema.ts";

const has = (plugin: RegisteredPlugin, feature: string) => plugin.features.some((f) => featureName(f) === feature);

export async function listSrTypes(xapi: XenApiClient, pluginRoot: string): Promise<TListSrTypesResponse> {
  const [supported, registry] = await Promise.all([
    xapi.call(z.array(z.string()), "SR.get_supported_types"),
    pluginRegistry(pluginRoot).catch((error: unknown) => {
      throw toTRPCError(error, `Scanning the plugin root ${pluginRoot}`);
    }),
  ]);
  const types = supported.map((type): TSrType => {
    const plugin = registry.find(type, "volume");
    if (plugin === undefined) {
      // The toolstack has the plugin but this console's root does not: offer it with what is known.
      return { type, name: type, description: "Not installed in the console's plugin root: its configuration keys are unknown here.", vendor: "", version: "", configuration: [], features: [], canCreate: true, canProbe: true, canDestroy: true };
    }
    const { query } = plugin;
    return {
      type,
      name: query.name,
      description: query.description,
      vendor: query.vendor,
      version: query.version,
      configuration: Object.entries(query.configuration).map(([key, description]) => ({ key, description })),
      features: plugin.features,
      canCreate: has(plugin, "SR_CREATE"),
      canProbe: has(plugin, "SR_PROBE"),
      canDestroy: has(plugin, "SR_DELETE"),
    };
  });
  types.sort((a, b) => a.type.localeCompare(b.type));
  return { types };
}
