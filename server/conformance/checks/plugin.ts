// Plugin.*: what every plugin, volume or datapath, must answer to be recognised at all.
import { type PluginKind, SUPPORTED_API_VERSIONS, srTypeOf } from "../../storage/registry.ts";
import { type Check, check } from "../check.ts";
import { Skip, expect, show } from "../expect.ts";

/**
 * Feature strings of compat-notes §1 (volume and datapath plugins), and those of the real vocabulary that
 * real plugins declare: VDI_DESTROY (xapi-storage's spelling of VDI_DELETE), the rest of xapi's capability
 * table (VDI_ATTACH_OFFLINE, VDI_GENERATE_CONFIG, SR_SUPPORTS_LOCAL_CACHING, SR_TRIM, SR_MULTIPATH), and
 * VDI_NONPERSISTENT of xapi-storage's datapath plugins.
 */
const KNOWN_FEATURES: ReadonlySet<string> = new Set([
  "SR_CREATE", "SR_DELETE", "SR_ATTACH", "SR_DETACH", "SR_SCAN", "SR_PROBE", "SR_UPDATE", "SR_METADATA", "SR_STATS",
  "VDI_CREATE", "VDI_DELETE", "VDI_ATTACH", "VDI_DETACH", "VDI_ACTIVATE", "VDI_DEACTIVATE", "VDI_ACTIVATE_READONLY",
  "VDI_MIRROR", "VDI_MIRROR_IN", "VDI_RESIZE", "VDI_RESIZE_ONLINE", "VDI_CLONE", "VDI_SNAPSHOT", "VDI_UPDATE",
  "VDI_INTRODUCE", "VDI_COPY", "VDI_CONFIG_CBT", "VDI_COMPOSE", "VDI_REVERT", "VDI_RESET_ON_BOOT",
  "THIN_PROVISIONING", "LARGE_VDI", "NONPERSISTENT",
  "VDI_DESTROY", "VDI_ATTACH_OFFLINE", "VDI_GENERATE_CONFIG", "SR_SUPPORTS_LOCAL_CACHING", "SR_TRIM", "SR_MULTIPATH",
  "VDI_NONPERSISTENT",
]);

/** A feature string, optionally versioned (`VDI_MIRROR/2`). */
const FEATURE = /^([A-Z_]+)(?:\/\d+)?$/;

export function pluginChecks(kind: PluginKind): Check[] {
  const label = `${kind} plugin`;
  const needs = kind === "datapath" ? (["datapath"] as const) : [];

  return [
    check(`${label}: Plugin.query answers a supported required_api_version`, { needs }, async (t) => {
      const query = await t.call("Plugin.query", {}, kind);
      expect(SUPPORTED_API_VERSIONS.includes(query.required_api_version), `required_api_version is ${show(query.required_api_version)}; supported: ${SUPPORTED_API_VERSIONS.join(", ")}`);
      expect(query.plugin !== "" && query.version !== "", `plugin and version must not be empty (plugin ${show(query.plugin)}, version ${show(query.version)})`);
      if (kind === "volume") {
        const type = srTypeOf(t.suite.volume.dir);
        expect(query.plugin.toLowerCase() === type, `plugin is ${show(query.plugin)} but the directory ${t.suite.volume.dir} gives SR type "${type}"`);
      }
    }),

    check(`${label}: Plugin.query features are known feature strings`, { needs }, async (t) => {
      const { features } = await t.call("Plugin.query", {}, kind);
      const unknown = features.filter((feature) => !KNOWN_FEATURES.has(FEATURE.exec(feature)?.[1] ?? ""));
      expect(unknown.length === 0, `unknown features: ${unknown.join(", ")}`);
    }),

    check(`${label}: Plugin.ls answers a list of SRs`, { needs, optional: ["Plugin.ls"] }, async (t) => {
      // The result type (a string list) is enforced by the client; many real plugins answer [] here.
      await t.call("Plugin.ls", {}, kind).catch((error: unknown) => {
        throw error instanceof Skip ? new Skip("not shipped; the toolstack never calls Plugin.ls") : error;
      });
    }),

    check(`${label}: Plugin.diagnostics answers a string`, { needs }, async (t) => {
      await t.call("Plugin.diagnostics", {}, kind);
    }),
  ];
}
