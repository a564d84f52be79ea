import type * as z from "zod/mini";
import { INTERFACES, METHODS, METHOD_NAMES, interfaceOf } from "../storage/interface.ts";
import { wireTypeName } from "../storage/wire.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "print the reference of every interface method (from the method table)";
export const help = `Usage: hangar methods [--markdown] [Interface]

Prints each method of the xapi-storage interfaces with its parameters, result type, the feature that
gates it and what it does. The table behind it is the one the client and our plugins use.

Options:
  --markdown   print Markdown tables
`;

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, { markdown: { type: "boolean" } });
  const only = positionals[0];
  if (only !== undefined && !INTERFACES.some((i) => i.toLowerCase() === only.toLowerCase())) {
    throw new UsageError(`unknown interface "${only}" (one of ${INTERFACES.join(", ")})`);
  }
  process.stdout.write(formatMethods(only?.toLowerCase(), values.markdown ?? false));
  return 0;
}

export function formatMethods(onlyInterface: string | undefined, markdown: boolean): string {
  const out: string[] = [];
  for (const iface of INTERFACES) {
    if (onlyInterface !== undefined && iface.toLowerCase() !== onlyInterface) continue;
    out.push(markdown ? `## ${iface}\n\n| Method | Parameters | Result | Feature | Description |\n|---|---|---|---|---|` : `${iface}`);
    for (const name of METHOD_NAMES.filter((m) => interfaceOf(m) === iface)) {
      const spec = METHODS[name];
      const params = ["dbg: string", ...Object.entries(spec.params as Record<string, z.ZodMiniType>).map(([k, s]) => `${k}: ${wireTypeName(s)}`)].join(", ");
      const result = wireTypeName(spec.result);
      const feature = spec.feature ?? "";
      out.push(
        markdown
          ? `| \`${name}\` | ${params} | ${result} | ${feature} | ${spec.doc} |`
          : `  ${name}(${params}) -> ${result}${feature ? `  [${feature}]` : ""}\n      ${spec.doc}`,
      );
    }
    out.push("");
  }
  return `${out.join("\n")}\n`;
}
