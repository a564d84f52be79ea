// What the plugins router accepts and returns. Field names follow the interface's query_result so one concept
// keeps one name from plugin to screen.
import { z } from "zod";

export const ZPluginKind = z.enum(["volume", "datapath"]);

export const ZDerivedFeature = z.object({
  feature: z.string(),
  /** The method script whose presence gives the feature; absent when the toolstack adds it to every volume plugin. */
  script: z.string().optional(),
});

export const ZRegisteredPlugin = z.object({
  kind: ZPluginKind,
  /** Directory name in the plugin root. */
  dir: z.string(),
  /** SR type (volume plugins) or URI scheme (datapath plugins). */
  type: z.string(),
  name: z.string(),
  description: z.string(),
  vendor: z.string(),
  copyright: z.string(),
  version: z.string(),
  required_api_version: z.string(),
  /** Effective features, as the toolstack takes them: declared, then derived. */
  features: z.array(z.string()),
  /** Plugin.query's features as the toolstack reads them (VDI_DESTROY is VDI_DELETE). */
  declaredFeatures: z.array(z.string()),
  /** Volume plugins: features not declared that the toolstack derives or adds. */
  derivedFeatures: z.array(ZDerivedFeature),
  /** device_config keys and what each means. */
  configuration: z.record(z.string(), z.string()),
  required_cluster_stack: z.array(z.string()),
  warnings: z.array(z.string()),
});

export const ZSkippedPlugin = z.object({
  kind: ZPluginKind,
  dir: z.string(),
  path: z.string(),
  reason: z.string(),
});

export const ZListPluginsResponse = z.object({
  root: z.string(),
  plugins: z.array(ZRegisteredPlugin),
  skipped: z.array(ZSkippedPlugin),
});

export const ZGetPluginDiagnosticsSchema = z.object({
  /** Directory name, SR type or URI scheme of a registered plugin. */
  name: z.string().trim().min(1, "Name a plugin").max(255),
  /** Narrows the match when an SR type and a URI scheme share a name (e.g. "file"). */
  kind: ZPluginKind.optional(),
});

export const ZGetPluginDiagnosticsResponse = z.object({
  name: z.string(),
  diagnostics: z.string(),
});

export type TDerivedFeature = z.infer<typeof ZDerivedFeature>;
export type TRegisteredPlugin = z.infer<typeof ZRegisteredPlugin>;
export type TSkippedPlugin = z.infer<typeof ZSkippedPlugin>;
export type TListPluginsResponse = z.infer<typeof ZListPluginsResponse>;
