// Runs the checks one after the other against a plugin root, reporting each as it ends, and removes
// everything the run created, whatever happened.
import { type PluginKind, type PluginRegistry, type RegisteredPlugin, type SkippedPlugin, scanPluginRoot, srTypeOf } from "../storage/registry.ts";
import type { Configuration } from "../storage/types.ts";
import type { Check, CheckResult } from "./check.ts";
import { CHECKS } from "./checks/index.ts";
import { CheckContext } from "./context.ts";
import { CallFailed, Failure, Skip } from "./expect.ts";
import { type Counts, countResults } from "./report.ts";
import { type Suite, type SuitePlugins, openSuite } from "./suite.ts";

export interface ConformanceOptions {
  /** The plugin root (volume/<dir>, datapath/<scheme>). */
  root: string;
  /** The volume plugin: directory name or SR type. */
  plugin: string;
  /** URI scheme of the datapath plugin to read and write volumes through; without it, no data checks. */
  datapath?: string;
  /** SR configuration; default: a fresh directory for the plugin's path / uri / file-uri key. */
  configuration?: Configuration;
  /** Per plugin call (default: the client's 60 s). */
  timeoutMs?: number;
  /** When aborted, the remaining checks are skipped and the clean-up runs. */
  signal?: AbortSignal;
  /** Default: every check. */
  checks?: readonly Check[];
}

export interface ConformanceReport extends Counts {
  root: string;
  plugin: string;
  datapath: string | undefined;
  results: CheckResult[];
}

export async function runConformance(options: ConformanceOptions, onResult: (result: CheckResult) => void = () => {}): Promise<ConformanceReport> {
  const checks = options.checks ?? CHECKS;
  const registry = await scanPluginRoot(options.root, { timeoutMs: options.timeoutMs });
  const volume = locate(registry, "volume", options.plugin);
  const datapath = options.datapath === undefined ? undefined : locate(registry, "datapath", options.datapath);
  const results: CheckResult[] = [];
  const emit = (result: CheckResult) => {
    results.push(result);
    onResult(result);
  };
  const report = (): ConformanceReport => ({
    root: registry.root,
    plugin: volume.dir,
    datapath: datapath?.dir,
    results,
    ...countResults(results),
  });

  for (const plugin of [volume, datapath]) {
    if (plugin !== undefined && "reason" in plugin) emit(unregistered(plugin));
  }
  if ("reason" in volume) {
    for (const check of checks) emit({ name: check.name, status: "skipped", reason: "volume plugin not registered", durationMs: 0 });
    return report();
  }

  const plugins: SuitePlugins = {
    registry,
    volume,
    datapath: datapath !== undefined && "client" in datapath ? datapath : undefined,
    datapathMissing: datapath === undefined ? "no --datapath" : "reason" in datapath ? "datapath plugin not registered" : undefined,
  };
  const suite = await openSuite(plugins, options.configuration);
  try {
    for (const check of checks) {
      const missing = options.signal?.aborted ? "interrupted" : unmet(suite, check);
      emit(missing === undefined ? await runCheck(suite, check) : { name: check.name, status: "skipped", reason: missing, durationMs: 0 });
    }
  } finally {
    const leftovers = await suite.cleanup.run();
    if (leftovers.length > 0) emit({ name: "clean-up: the run leaves nothing behind", status: "failed", reason: oneLine(leftovers.join("; ")), durationMs: 0 });
  }
  return report();
}

/** A plugin by directory name, SR type or scheme, registered or not; unknown names are the caller's mistake. */
function locate(registry: PluginRegistry, kind: PluginKind, name: string): RegisteredPlugin | SkippedPlugin {
  const registered = registry.find(name, kind);
  if (registered !== undefined) return registered;
  const typeOf = (dir: string) => (kind === "volume" ? srTypeOf(dir) : dir.toLowerCase());
  const skipped = registry.skipped.find((s) => s.kind === kind && (s.dir === name || typeOf(s.dir) === name.toLowerCase()));
  if (skipped !== undefined) return skipped;
  throw new Error(`no ${kind} plugin "${name}" in ${registry.root}`);
}

function unregistered(plugin: SkippedPlugin): CheckResult {
  return { name: `${plugin.kind} plugin ${plugin.dir}: Plugin.Query registers it`, status: "failed", reason: oneLine(plugin.reason), durationMs: 0 };
}

/** Why a check cannot run here, or undefined when it can. */
function unmet(suite: Suite, check: Check): string | undefined {
  if (check.needs.includes("datapath") && suite.datapathMissing !== undefined) return suite.datapathMissing;
  const lacking = check.features.filter((feature) => !suite.features.has(feature));
  if (lacking.length > 0) return `no ${lacking.join(", ")}`;
  if (check.needs.includes("data") && !suite.dataImplemented) return "the datapath plugin implements no Data.*";
  if (check.needs.includes("sr")) {
    const sr = suite.sr;
    if (sr === undefined || sr.sr === "") return "no SR was created and attached";
    if (sr.destroyed) return "the SR is destroyed";
  }
  return undefined;
}

async function runCheck(suite: Suite, check: Check): Promise<CheckResult> {
  const started = performance.now();
  const t = new CheckContext(suite, check);
  let status: CheckResult["status"] = "passed";
  let reason: string | undefined;
  try {
    await check.run(t);
  } catch (error) {
    const byPlugin = error instanceof Failure || error instanceof CallFailed;
    status = error instanceof Skip ? "skipped" : byPlugin && check.advisory !== undefined ? "note" : "failed";
    reason = error instanceof Skip || byPlugin ? error.message : `unexpected error: ${(error as Error).message ?? String(error)}`;
    if (status === "note") reason = `${reason} (advisory: ${check.advisory})`;
  }
  const leftovers = await t.cleanup.run();
  if (leftovers.length > 0) {
    const cleanup = `clean-up: ${leftovers.join("; ")}`;
    reason = status === "failed" ? `${reason}; ${cleanup}` : cleanup;
    status = "failed";
  }
  return { name: check.name, status, reason: reason === undefined ? undefined : oneLine(reason), durationMs: Math.round(performance.now() - started) };
}

/** Reasons end up on one line after the check's name; plugin messages may span several. */
function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " | ").trim();
}
