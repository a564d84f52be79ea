import { formatResult, formatSummary } from "../conformance/report.ts";
import { runConformance } from "../conformance/runner.ts";
import { parseConfigOptions } from "../conformance/sr-config.ts";
import { defaultPluginRoot } from "../storage/registry.ts";
import { timeoutOption } from "./plugins.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "check that a volume plugin (and a datapath plugin) behave as the interface says";
export const help = `Usage: hangar conformance [--root DIR] <volume plugin> [--datapath SCHEME] [--config key=value ...] [--json]

Drives the plugin through the plugin client, exactly as a toolstack would, and checks the semantics of
the xapi-storage interface: Plugin.query and its features, the life of an SR, volumes (create, stat,
set/unset, snapshot, clone, resize, compare, revert, copy, CBT, errors), and with --datapath the
datapath states, the data written through them, and Data.copy / Data.mirror to an NBD target.
A plugin's features are those the toolstack takes it to have: declared, or derived from the method
scripts it ships (see hangar plugins); checks of features it lacks are skipped, saying which. Checks of
situations the toolstack never lets a plugin meet (calls on a detached SR) only make notes.
Each check prints as it ends (✓ passed, ✗ failed — reason, - skipped, ! note — reason), then
"N passed, N failed, N skipped, N notes". The exit status is 1 when a check failed (130 when interrupted).

The SR is created from --config; without it, a fresh temporary directory is given to a plugin whose
configuration has a path, uri or file-uri key. Everything created is destroyed at the end, even after
a failure or Ctrl-C (a plugin without SR_DELETE leaves its SR detached).

Example:
  hangar conformance --root server/storage/fixtures/python-root scratch --datapath loop

Options:
  --root DIR          plugin root (default: $HANGAR_PLUGIN_ROOT or the bundled server/plugins)
  --datapath SCHEME   datapath plugin to read and write volumes through (URI scheme, e.g. file, nbd)
  --config key=value  SR configuration entry (repeatable)
  --json              print one JSON report at the end instead of lines
  --timeout SECONDS   kill a plugin call after this long (default 60)
`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    root: { type: "string" },
    datapath: { type: "string" },
    config: { type: "string", multiple: true },
    json: { type: "boolean" },
    timeout: { type: "string" },
  });
  const [plugin, ...extra] = positionals;
  if (plugin === undefined) throw new UsageError("needs <volume plugin>");
  if (extra.length > 0) throw new UsageError(`unexpected argument "${extra[0]}"`);
  let configuration;
  try {
    configuration = values.config === undefined ? undefined : parseConfigOptions(values.config);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const json = values.json ?? false;
  const root = values.root ?? defaultPluginRoot();

  // The first Ctrl-C skips the remaining checks so that the clean-up still runs; a second one kills.
  const interrupt = new AbortController();
  const onSigint = () => {
    process.stderr.write("\ninterrupted: cleaning up (Ctrl-C again to quit at once)\n");
    interrupt.abort();
  };
  process.once("SIGINT", onSigint);
  try {
    const header = `Conformance of ${plugin}${values.datapath === undefined ? "" : ` with datapath ${values.datapath}`} in ${root}\n`;
    let started = false;
    const report = await runConformance(
      { root, plugin, datapath: values.datapath, configuration, timeoutMs: timeoutOption(values.timeout), signal: interrupt.signal },
      (result) => {
        if (json) return;
        // The header waits for the first result: a plugin that cannot be found is an error, not a run.
        process.stdout.write(`${started ? "" : header}${formatResult(result)}\n`);
        started = true;
      },
    );
    process.stdout.write(json ? `${JSON.stringify({ ...report, summary: formatSummary(report) }, null, 2)}\n` : `${formatSummary(report)}\n`);
    if (interrupt.signal.aborted) return 130;
    return report.failed > 0 ? 1 : 0;
  } finally {
    process.off("SIGINT", onSigint);
  }
}
