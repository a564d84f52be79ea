// Toolstacks for tests: in this process on a fresh data dir (closed and removed when the test ends), or
// `hangar serve` as a process of its own.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { killPids, processesWithEnv } from "../stray-processes.ts";
import { type RunningToolstack, type ServeOptions, serveToolstack } from "./serve.ts";
import { type Feature, openToolstack, type Toolstack, type ToolstackOptions } from "./toolstack.ts";

export const ROOT_PASSWORD = "hangar-test-password";

/** A new temp dir for a toolstack's data; the caller removes it. */
export async function tempDataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "hangar-toolstack-"));
  // The host uuid comes from the environment or the default data dir, never options.dataDir: keep tests off the latter.
  process.env.HANGAR_HOST_UUID ??= randomUUID();
  return dir;
}

export async function openTestToolstack(t: TestContext, options: ToolstackOptions = {}, features: Feature[] = []): Promise<Toolstack> {
  const dir = await tempDataDir();
  const ts = await openToolstack({ dataDir: dir, rootPassword: ROOT_PASSWORD, ...options }, features);
  t.after(async () => {
    await ts.close();
    await rm(dir, { recursive: true, force: true });
  });
  return ts;
}

/** The toolstack served on 127.0.0.1 (HTTP only, a free port); `url` ends in "/". */
export async function serveTestToolstack(t: TestContext, options: Partial<ServeOptions> = {}): Promise<RunningToolstack & { url: string }> {
  const dir = await tempDataDir();
  const running = await serveToolstack({ port: 0, httpsPort: null, address: "127.0.0.1", dataDir: dir, rootPassword: ROOT_PASSWORD, ...options });
  t.after(async () => {
    await running.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { ...running, url: `http://127.0.0.1:${running.httpPort}/` };
}

export interface ServeProcess {
  /** Base URL, ending in "/". */
  url: string;
  pid: number;
  dataDir: string;
  /** What the service printed before it listened (e.g. a generated root password). */
  banner: string;
  /** Stops the service and every daemon its plugin calls started (found by the data dir in their environment). */
  stop(): Promise<void>;
  /** Kills the service and its daemons at once (SIGKILL), as a host that dies. */
  kill(): Promise<void>;
}

const HANGAR = fileURLToPath(new URL("../../bin/hangar", import.meta.url));

/**
 * `hangar serve` as its own process over `dataDir`, HTTP only, on `address` (default 127.0.0.1) and `port`
 * (default a free one).
 */
export async function startServeProcess(dataDir: string, env: Record<string, string | undefined> = {}, where: { address?: string; port?: number } = {}): Promise<ServeProcess> {
  const { HANGAR_RUN_DIR: _run, HANGAR_METRICS_DIR: _metrics, HANGAR_HOST_UUID: _host, ...inherited } = process.env;
  const address = where.address ?? "127.0.0.1";
  const child = spawn(HANGAR, ["serve", "--port", String(where.port ?? 0), "--https-port", "off", "--address", address], {
    env: { ...inherited, HANGAR_DATA_DIR: dataDir, HANGAR_ROOT_PASSWORD: ROOT_PASSWORD, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    child.kill(signal);
    await exited;
    // Twice: a daemon being killed may have just started one of its own.
    for (let pass = 0; pass < 2; pass++) await killPids(processesWithEnv(`HANGAR_DATA_DIR=${dataDir}`));
  };
  let output = "";
  let errors = "";
  child.stderr.setEncoding("utf8").on("data", (text: string) => (errors = (errors + text).slice(-4000)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hangar serve did not listen within 60 s: ${errors}`)), 60_000);
    child.stdout.setEncoding("utf8").on("data", (text: string) => {
      output += text;
      const listening = new RegExp(`^toolstack listening: http://${address.replaceAll(".", "\\.")}:(\\d+)/`, "m").exec(output);
      if (listening !== null) {
        clearTimeout(timer);
        resolve(Number(listening[1]));
      }
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`hangar serve exited: ${errors}`));
    });
  }).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  return { url: `http://${address}:${port}/`, pid: child.pid!, dataDir, banner: output, stop: () => stop(), kill: () => stop("SIGKILL") };
}
