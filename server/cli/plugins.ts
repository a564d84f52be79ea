import { type PluginRegistry, defaultPluginRoot, scanPluginRoot } from "../storage/registry.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "list the plugins of a plugin root, and those skipped with the reason";
export const help = `Usage: hangar plugins [--root DIR] [--json] [--timeout SECONDS]

Scans DIR/volume/* and DIR/datapath/*, calls Plugin.Query on each plugin, and lists the registered
plugins (kind, SR type or URI scheme, name, version, vendor, required API version, features,
configuration keys) and the skipped ones with the reason.

Features are shown as the toolstack takes them. declared: what Plugin.Query lists (VDI_DESTROY read as
VDI_DELETE). derived (volume plugins): one per method script present, the script in brackets, and those
the toolstack adds to every volume plugin, marked (toolstack). --json gives declaredFeatures,
derivedFeatures and features, the effective list.

Options:
  --root DIR         plugin root (default: $HANGAR_PLUGIN_ROOT or the bundled server/plugins)
  --json             print JSON instead of a table
  --timeout SECONDS  per-plugin timeout of Plugin.Query (default 60)
`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    root: { type: "string" },
    json: { type: "boolean" },
    timeout: { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const registry = await scanPluginRoot(values.root ?? defaultPluginRoot(), { timeoutMs: timeoutOption(values.timeout) });
  process.stdout.write(values.json ? `${JSON.stringify(toJson(registry), null, 2)}\n` : formatTable(registry));
  return 0;
}

/** Node timers overflow past 2^31-1 ms and then fire after 1 ms, which would kill every plugin at once. */
const MAX_TIMEOUT_SECONDS = Math.floor((2 ** 31 - 1) / 1000);

export function timeoutOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (!(seconds > 0 && seconds <= MAX_TIMEOUT_SECONDS)) {
    throw new UsageError(`--timeout must be a positive number of seconds up to ${MAX_TIMEOUT_SECONDS}, got "${value}"`);
  }
  return seconds * 1000;
}

function toJson(registry: PluginRegistry) {
  return {
    root: registry.root,
    plugins: registry.plugins.map(({ kind, dir, path, type, query, declaredFeatures, derivedFeatures, features, warnings }) => ({
      kind,
      dir,
      path,
      type,
      ...query,
      features,
      declaredFeatures,
      derivedFeatures,
      warnings,
    })),
    skipped: registry.skipped,
  };
}

function formatTable(registry: PluginRegistry): string {
  const lines = [`Plugin root: ${registry.root}`, ""];
  if (registry.plugins.length === 0) lines.push("No plugins registered.");
  for (const p of registry.plugins) {
    const q = p.query;
    lines.push(`${p.kind} ${p.type}  (${p.dir})`);
    lines.push(`  name:         ${q.name} — ${q.description}`);
    lines.push(`  version:      ${q.version}   vendor: ${q.vendor}   requires API ${q.required_api_version}`);
    lines.push(`  declared:     ${p.declaredFeatures.join(" ") || "(none)"}`);
    if (p.derivedFeatures.length > 0) {
      lines.push(`  derived:      ${p.derivedFeatures.map(({ feature, script }) => `${feature} (${script ?? "toolstack"})`).join(", ")}`);
    }
    const config = Object.entries(q.configuration);
    lines.push(`  configuration:${config.length === 0 ? " (none)" : ""}`);
    for (const [key, description] of config) lines.push(`    ${key}: ${description}`);
    if (q.required_cluster_stack.length > 0) lines.push(`  cluster stack: ${q.required_cluster_stack.join(" | ")}`);
    for (const warning of p.warnings) lines.push(`  warning:      ${warning}`);
    lines.push("");
  }
  if (registry.skipped.length > 0) {
    lines.push("Skipped:");
    for (const s of registry.skipped) lines.push(`  ${s.kind} ${s.dir}: ${s.reason}`);
    lines.push("");
  }
  return `${lines.join("\n")}`;
}
