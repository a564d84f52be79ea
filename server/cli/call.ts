import { StorageError } from "../storage/errors.ts";
import { type MethodName, interfaceOf, lookupMethod } from "../storage/interface.ts";
import { parseWireJson } from "../storage/json.ts";
import { type PluginKind, defaultPluginRoot, scanPluginRoot, srTypeOf } from "../storage/registry.ts";
import { timeoutOption } from "./plugins.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "call one method of a plugin and print the result";
export const help = `Usage: hangar call [--root DIR] [--timeout SECONDS] <plugin> <Interface.method> [params-json]

<plugin> is the plugin's directory name, its SR type or its datapath URI scheme. params-json is the
object of named parameters (default {}); "dbg" is filled in when absent. The result is printed as
JSON. On a plugin error the code and params go to stderr and the exit status is 1.

Example:
  hangar call file SR.ls '{"sr":"file:///srv/sr1"}'

Options:
  --root DIR         plugin root (default: $HANGAR_PLUGIN_ROOT or the bundled server/plugins)
  --timeout SECONDS  kill the plugin after this long (default 60)
`;

const DATA_PLANE: readonly string[] = ["Datapath", "Data"];

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, { root: { type: "string" }, timeout: { type: "string" } });
  const [pluginName, methodName, paramsText = "{}", ...extra] = positionals;
  if (pluginName === undefined || methodName === undefined) throw new UsageError("needs <plugin> and <Interface.method>");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}" (quote the params JSON)`);
  const method = lookupMethod(methodName);
  if (method === undefined) throw new UsageError(`unknown method "${methodName}" (see "hangar methods")`);
  const params = parseParams(paramsText);

  const registry = await scanPluginRoot(values.root ?? defaultPluginRoot(), { timeoutMs: timeoutOption(values.timeout) });
  const plugin = registry.find(pluginName, kindFor(method)) ?? registry.find(pluginName);
  if (plugin === undefined) {
    const lower = pluginName.toLowerCase();
    // Named the ways `find` accepts, so a skipped plugin says why rather than "no plugin".
    const skipped = registry.skipped.find((s) => s.dir.toLowerCase() === lower || (s.kind === "volume" && srTypeOf(s.dir) === lower));
    throw new Error(skipped ? `plugin ${pluginName} was skipped: ${skipped.reason}` : `no plugin "${pluginName}" in ${registry.root}`);
  }
  try {
    const result = await plugin.client.call(method, { dbg: `hangar call ${method}`, ...params } as never);
    process.stdout.write(`${JSON.stringify(result ?? null, null, 2)}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof StorageError)) throw error;
    process.stderr.write(`${error.code} ${JSON.stringify(error.params)}\n${error.message}\n`);
    return 1;
  }
}

function kindFor(method: MethodName): PluginKind | undefined {
  const iface = interfaceOf(method);
  if (iface === "Plugin") return undefined;
  return DATA_PLANE.includes(iface) ? "datapath" : "volume";
}

function parseParams(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = parseWireJson(text);
  } catch (error) {
    throw new UsageError(`params-json is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError("params-json must be a JSON object");
  return value as Record<string, unknown>;
}
