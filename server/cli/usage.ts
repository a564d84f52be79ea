import { parseArgs, type ParseArgsConfig } from "node:util";

/** Wrong arguments: the CLI prints the message and the command's help, and exits 2. */
export class UsageError extends Error {}

export function parseCommandLine<T extends NonNullable<ParseArgsConfig["options"]>>(argv: string[], options: T) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}
