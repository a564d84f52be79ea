// Set-up of the tests of the storage and VM classes (testing.ts has the core's): a host whose data dir the
// plugin processes share (HANGAR_DATA_DIR in the environment they inherit), the toolstack with every
// feature served on a free port, and a XenAPI client (the CLI's JSON-RPC call) that speaks to it over real HTTP.
import assert from "node:assert/strict";
import { closeSync, ftruncateSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { isPidRunning } from "../plugins/filesr/liveness.ts";
import { TOOLSTACK_FEATURES } from "./features.ts";
import { type RunningToolstack, serveToolstack } from "./serve.ts";
import { ROOT_PASSWORD, tempDataDir } from "./testing.ts";
import { XenApiError } from "../xenapi/errors.ts";
import { jsonRpcCall } from "../xenapi/client.ts";

export const MiB = 1024 * 1024;
export const PiB = 1024 * 1024 * 1024 * MiB;

/** Whether the filesystem of `dir` takes a (sparse) file of `size` bytes: ext4 refuses 1 PiB, tmpfs and XFS take it. */
export function holdsFileOf(dir: string, size: number): boolean {
  const probe = mkdtempSync(join(dir, "probe-"));
  const fd = openSync(join(probe, "file"), "w");
  try {
    ftruncateSync(fd, size);
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
    rmSync(probe, { recursive: true, force: true });
  }
}

/** A XenAPI client logged in as root. */
export class XenApiClient {
  readonly url: string;
  readonly session: string;
  private constructor(url: string, session: string) {
    this.url = url;
    this.session = session;
  }

  static async login(url: string): Promise<XenApiClient> {
    return new XenApiClient(url, String(await jsonRpcCall(url, "session.login_with_password", ["root", ROOT_PASSWORD])));
  }

  /** A call with the session as its first parameter. */
  call<T = unknown>(method: string, ...params: unknown[]): Promise<T> {
    return jsonRpcCall(this.url, method, [this.session, ...params]) as Promise<T>;
  }

  /** Waits for a task to leave pending; answers its record. */
  async waitTask(task: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
    for (const deadline = Date.now() + timeoutMs; ; await sleep(100)) {
      const record = await this.call<Record<string, unknown>>("task.get_record", task);
      if (record.status !== "pending" && record.status !== "cancelling") return record;
      if (Date.now() > deadline) throw new Error(`task ${task} still ${String(record.status)} after ${timeoutMs} ms`);
    }
  }
}

/** Asserts a call fails with a XenAPI error of that code (and params, when given). */
export async function assertXenError(promise: Promise<unknown>, code: string, params?: readonly string[]): Promise<XenApiError> {
  const error = await xenError(promise);
  assert.equal(error.code, code, error.message);
  if (params !== undefined) assert.deepEqual(error.params, params);
  return error;
}

/** The error a promise rejects with, as a XenAPI error. */
export async function xenError(promise: Promise<unknown>): Promise<XenApiError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof XenApiError) return error;
    throw error;
  }
  throw new Error("the call succeeded");
}

/** A data dir for a host, shared from now on with the plugin processes (they inherit the environment). */
export async function testHost(): Promise<{ dataDir: string; cleanUp(): void }> {
  const dataDir = await tempDataDir();
  process.env.HANGAR_DATA_DIR = dataDir;
  return {
    dataDir,
    cleanUp() {
      // What the plugins started for this host (NBD servers, copies, datasource writers, GC) goes with it.
      for (const pid of hostProcesses(dataDir)) process.kill(pid, "SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Pids of the live plugin daemons of a host's volumes (from their pid files). */
export function daemonPids(dataDir: string): number[] {
  const dir = join(dataDir, "run", "daemons");
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((name) => name.endsWith(".pid"))
    .map((name) => Number(readFileSync(join(dir, name), "utf8")))
    .filter((pid) => Number.isInteger(pid) && isPidRunning(pid));
}

/** Pids of the processes whose command line names a path in the host's data dir (every plugin daemon of it). */
function hostProcesses(dataDir: string): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
    .filter((name) => {
      try {
        return readFileSync(`/proc/${name}/cmdline`, "utf8").includes(`${dataDir}/`);
      } catch {
        return false;
      }
    })
    .map(Number);
}

export interface TestToolstack {
  service: RunningToolstack;
  client: XenApiClient;
  dataDir: string;
  /** Closes the service, runs `meanwhile`, and starts it again over the same data dir (a restart of `hangar serve`). */
  restart(meanwhile?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/** A toolstack with every feature over a fresh host, on a free port of 127.0.0.1. */
export async function startTestToolstack(options: { pluginRoot?: string; pluginTimeoutMs?: number; httpsPort?: number | null } = {}): Promise<TestToolstack> {
  const host = await testHost();
  const start = async () => {
    const service = await serveToolstack({
      port: 0,
      httpsPort: null,
      address: "127.0.0.1",
      dataDir: host.dataDir,
      rootPassword: ROOT_PASSWORD,
      features: TOOLSTACK_FEATURES,
      ...options,
    });
    return { service, client: await XenApiClient.login(`http://127.0.0.1:${service.httpPort}`) };
  };
  const running: TestToolstack = {
    ...(await start()),
    dataDir: host.dataDir,
    async restart(meanwhile) {
      await running.service.close();
      await meanwhile?.();
      Object.assign(running, await start());
    },
    async stop() {
      // Should the close hang (its hook then times out), the listening sockets must not keep the test file alive.
      running.service.http.unref();
      running.service.https?.unref();
      await running.service.close();
      host.cleanUp();
    },
  };
  return running;
}
