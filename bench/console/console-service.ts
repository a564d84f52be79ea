// The console as the bench runs it: the production build (`bin/hangar-console`: `next start`) in a process of its own, on the
// bench's toolstack, and a session cookie minted by the console's own login code with the console's secret.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { SESSION_COOKIE, logIn } from "../../server/auth/session.ts";
import { ROOT_PASSWORD } from "../../server/toolstack/testing.ts";
import { cpuSeconds, runCommand } from "../processes.ts";
import { freePort } from "../../server/free-port.ts";

const repo = join(import.meta.dirname, "..", "..");
const bin = join(repo, "node_modules", ".bin");

export interface ConsoleService {
  url: string;
  /** The `next start` process: its CPU is the console's. */
  pid: number;
  /** `hangar_session=…`, logged in as root. */
  cookie: string;
  cookieValue: string;
  cpu(): number;
  stop(): Promise<void>;
}

/**
 * Builds the console unless HANGAR_BENCH_SKIP_BUILD=1 and a build exists (a stale build would measure old
 * code), starts it on a free port against `toolstackUrl`, and logs in.
 */
export async function startConsole(toolstackUrl: string): Promise<ConsoleService> {
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}`, HANGAR_TOOLSTACK_URL: toolstackUrl, HANGAR_CONSOLE_SECRET: `bench-${process.pid}-${Date.now()}` };
  if (process.env.HANGAR_BENCH_SKIP_BUILD !== "1" || !existsSync(join(repo, ".next", "BUILD_ID"))) {
    process.stderr.write("  building the console (next build)...\n");
    const build = await runCommand(join(bin, "next"), ["build"], { env, timeoutMs: 15 * 60_000 });
    process.stderr.write(`  built in ${build.seconds.toFixed(0)} s\n`);
  }
  const port = await freePort();
  const child = spawn(join(repo, "bin", "hangar-console"), ["-H", "127.0.0.1", "-p", String(port)], { cwd: repo, env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (text: string) => (stderr = (stderr + text).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(timer);
  };
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`next start exited: ${stderr.trim()}`);
    const up = await fetch(`${url}/login`).then((r) => r.ok, () => false);
    if (up) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the console did not answer within 60 s: ${stderr.trim()}`);
    }
    await sleep(100);
  }
  // The same login the console's form runs, with the console's secret: the cookie it would have set.
  const saved = { url: process.env.HANGAR_TOOLSTACK_URL, secret: process.env.HANGAR_CONSOLE_SECRET };
  process.env.HANGAR_TOOLSTACK_URL = env.HANGAR_TOOLSTACK_URL;
  process.env.HANGAR_CONSOLE_SECRET = env.HANGAR_CONSOLE_SECRET;
  const { cookie } = await logIn("root", ROOT_PASSWORD);
  for (const [name, value] of [["HANGAR_TOOLSTACK_URL", saved.url], ["HANGAR_CONSOLE_SECRET", saved.secret]] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  return { url, pid: child.pid!, cookie: `${SESSION_COOKIE}=${cookie}`, cookieValue: cookie, cpu: () => cpuSeconds(child.pid!), stop };
}

/** One tRPC query over HTTP as the browser sends it (GET, input as JSON), failing on an error answer. */
export async function trpcQuery(service: ConsoleService, path: string, input?: unknown): Promise<unknown> {
  const query = input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify(input))}`;
  const response = await fetch(`${service.url}/api/trpc/${path}${query}`, { headers: { cookie: service.cookie } });
  const body = (await response.json()) as { result?: { data: unknown }; error?: { message: string } };
  if (!response.ok || body.result === undefined) throw new Error(`${path}: HTTP ${response.status}: ${body.error?.message ?? "no result"}`);
  return body.result.data;
}
