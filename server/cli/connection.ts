// How the CLI's toolstack commands reach the toolstack: its URL, the user's password (HANGAR_PASSWORD, else
// asked on a terminal), a session for the command's work, and objects named the ways people name them.
import { z } from "zod";
import { UsageError } from "./usage.ts";
import { XenApiClient } from "../xenapi/client.ts";

export const DEFAULT_URL = "http://127.0.0.1:8080";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Reads a password from the terminal without echoing it. */
async function askPassword(prompt: string): Promise<string> {
  const { stdin, stderr } = process;
  if (!stdin.isTTY) throw new UsageError("no password: set HANGAR_PASSWORD (or run on a terminal to be asked)");
  stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  let typed = "";
  try {
    for await (const chunk of stdin) {
      for (const char of chunk as string) {
        if (char === "\r" || char === "\n") return typed;
        if (char === "\u0003") throw new Error("interrupted");
        typed = char === "\u007f" || char === "\b" ? typed.slice(0, -1) : typed + char;
      }
    }
    return typed;
  } finally {
    stdin.setRawMode(false);
    stderr.write("\n");
  }
}

/** Logs in, runs `work`, logs out whatever happens. */
export async function withClient<T>(values: { url?: string; user?: string }, work: (client: XenApiClient) => Promise<T>): Promise<T> {
  const url = values.url ?? (process.env.HANGAR_URL || DEFAULT_URL);
  const user = values.user ?? "root";
  const password = process.env.HANGAR_PASSWORD ?? (await askPassword(`Password for ${user} at ${url}: `));
  const client = await XenApiClient.login(url, user, password);
  try {
    return await work(client);
  } finally {
    await client.logout();
  }
}

/** An object given by ref, uuid or (`byName`) name label: its ref. */
export async function resolveRef(client: XenApiClient, cls: string, given: string, byName = false): Promise<string> {
  if (given.startsWith("OpaqueRef:")) return given;
  if (UUID.test(given) || !byName) return client.call(z.string(), `${cls}.get_by_uuid`, given);
  const refs = await client.call(z.array(z.string()), `${cls}.get_by_name_label`, given);
  if (refs.length !== 1) throw new Error(refs.length === 0 ? `no ${cls} named "${given}"` : `${refs.length} ${cls}s are named "${given}": give a uuid`);
  return refs[0]!;
}
