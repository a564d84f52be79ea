// Clients of our plugins through the real exec transport (a process per call, params on stdin), as the
// toolstack runs them.
import { fileURLToPath } from "node:url";
import { createPluginClient, type PluginClient } from "../../server/storage/client.ts";
import { createExecTransport } from "../../server/storage/exec-transport.ts";

const PLUGIN_ROOT = fileURLToPath(new URL("../../server/plugins/", import.meta.url));
export const VOLUME_PLUGIN = "org.xen.xapi.storage.file";

export function pluginDir(kind: "volume" | "datapath", name: string): string {
  return `${PLUGIN_ROOT}${kind}/${name}`;
}

export function pluginClient(kind: "volume" | "datapath", name: string): PluginClient {
  return createPluginClient(name, createExecTransport(pluginDir(kind, name), name));
}

/** The `dbg` every bench call carries. */
export const DBG = "hangar-bench";
