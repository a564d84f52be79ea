// `hangar`: the command line of Hangar. Each command is a module exporting `run(argv)` and its help text.
import * as audit from "./audit.ts";
import * as call from "./call.ts";
import * as conformance from "./conformance.ts";
import * as methods from "./methods.ts";
import * as plugins from "./plugins.ts";
import * as serve from "./serve.ts";
import { toolstackCommands } from "./toolstack-commands.ts";
import { UsageError } from "./usage.ts";
import { transferCommands } from "./transfer.ts";

const COMMANDS: Record<string, { summary: string; help: string; run(argv: string[]): Promise<number> }> = {
  plugins,
  call,
  methods,
  conformance,
  serve,
  audit,
  ...toolstackCommands,
  ...transferCommands,
};

const HELP = `hangar — drive SMAPIv3 (xapi-storage) plugins from the command line

Usage: hangar <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(20)}${command.summary}`)
  .join("\n")}

Run "hangar <command> --help" for the options of a command.
Environment: HANGAR_PLUGIN_ROOT (default: the bundled root server/plugins); HANGAR_URL and
HANGAR_PASSWORD for the toolstack's commands (sr-list … vdi-destroy, vm-import … vdi-export).
`;

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(HELP);
    return name === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    process.stderr.write(`hangar: unknown command "${name}"\n\n${HELP}`);
    return 2;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(command.help);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`hangar ${name}: ${error.message}\n\n${command.help}`);
      return 2;
    }
    process.stderr.write(`hangar ${name}: ${(error as Error).message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
