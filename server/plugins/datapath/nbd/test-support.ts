// Shared set-up of the nbd datapath tests: a Hangar host (data dir, run dir, host uuid) in a temporary
// directory, a file SR made through the volume plugin, and both plugins driven through the real plugin
// client (a process per call, as the toolstack runs them).
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { PluginClient } from "../../../storage/client.ts";
import { scanPluginRoot } from "../../../storage/registry.ts";
import type { Operation, Status } from "../../../storage/types.ts";
import { isPidRunning } from "../../filesr/liveness.ts";
import { daemonName } from "./paths.ts";

export const dbg = "nbd datapath test";
export const MiB = 1024 * 1024;
const PLUGIN_ROOT = resolve(import.meta.dirname, "../..");

export interface HostEnv {
  HANGAR_DATA_DIR: string;
  HANGAR_RUN_DIR: string;
  HANGAR_HOST_UUID: string;
}

export interface TestVolume {
  key: string;
  /** The volume's nbd datapath URI. */
  uri: string;
  size: number;
}

export class TestHangar {
  readonly root: string;
  readonly host: HostEnv;
  readonly sr: string;
  readonly volumes: PluginClient;
  readonly nbd: PluginClient;
  readonly #hosts: HostEnv[];

  private constructor(root: string, host: HostEnv, sr: string, volumes: PluginClient, nbd: PluginClient) {
    this.root = root;
    this.host = host;
    this.sr = sr;
    this.volumes = volumes;
    this.nbd = nbd;
    this.#hosts = [host];
  }

  /** A new host in a temporary directory with an attached SR; its env is the process env from now on. */
  static async start(): Promise<TestHangar> {
    const root = mkdtempSync(join(tmpdir(), "hangar-nbdp-"));
    const host = makeHost(root, "h1");
    Object.assign(process.env, host);
    const registry = await scanPluginRoot(PLUGIN_ROOT);
    const volumes = registry.find("file", "volume")?.client;
    const nbd = registry.find("nbd", "datapath")?.client;
    if (volumes === undefined || nbd === undefined) throw new Error(`plugins missing: ${JSON.stringify(registry.skipped)}`);
    const path = join(root, "sr");
    await volumes.call("SR.create", { dbg, uuid: randomUUID(), configuration: { path }, name: "nbd tests", description: "" });
    const sr = await volumes.call("SR.attach", { dbg, configuration: { path } });
    return new TestHangar(root, host, sr, volumes, nbd);
  }

  /** Another host sharing the SR: its own data and run dirs and host uuid. */
  addHost(name: string): HostEnv {
    const host = makeHost(this.root, name);
    this.#hosts.push(host);
    return host;
  }

  /** Runs `body` with another host's env: plugin calls made meanwhile (one at a time!) act as that host. */
  async asHost<T>(host: HostEnv, body: () => Promise<T>): Promise<T> {
    const saved = { ...this.host };
    Object.assign(process.env, host);
    try {
      return await body();
    } finally {
      Object.assign(process.env, saved);
    }
  }

  async createVolume(size: number): Promise<TestVolume> {
    const volume = await this.volumes.call("Volume.create", { dbg, sr: this.sr, name: "v", description: "", size, sharable: false });
    const uri = volume.uri.find((u) => u.startsWith("nbd:"));
    if (uri === undefined) throw new Error(`no nbd URI in ${JSON.stringify(volume.uri)}`);
    return { key: volume.key, uri, size: volume.virtual_size };
  }

  /** open + attach + activate (read-write unless `readonly`); answers the NBD URI of the export. */
  async plug(uri: string, domain: string, options: { persistent?: boolean; readonly?: boolean } = {}): Promise<string> {
    await this.nbd.call("Datapath.open", { dbg, uri, persistent: options.persistent ?? true });
    const { implementations } = await this.nbd.call("Datapath.attach", { dbg, uri, domain });
    await this.nbd.call(options.readonly ? "Datapath.activate_readonly" : "Datapath.activate", { dbg, uri, domain });
    const nbd = implementations.find((i) => i[0] === "Nbd");
    if (nbd === undefined || nbd[0] !== "Nbd") throw new Error(`no Nbd implementation in ${JSON.stringify(implementations)}`);
    return nbd[1].uri;
  }

  /** deactivate + detach + close. */
  async unplug(uri: string, domain: string): Promise<void> {
    await this.nbd.call("Datapath.deactivate", { dbg, uri, domain });
    await this.nbd.call("Datapath.detach", { dbg, uri, domain });
    await this.nbd.call("Datapath.close", { dbg, uri });
  }

  async waitComplete(operation: Operation, timeoutMs = 30_000): Promise<Status> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const status = await this.nbd.call("Data.stat", { dbg, operation });
      if (status.complete) return status;
      if (Date.now() > deadline) throw new Error(`${JSON.stringify(operation)} not complete after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /** Pids of live volume daemons of a host (from their pid files); a zombie is not alive. */
  daemonPids(host: HostEnv = this.host): number[] {
    const dir = join(host.HANGAR_RUN_DIR, "daemons");
    return listFiles(dir)
      .filter((name) => name.endsWith(".pid"))
      .map((name) => Number(readFileSync(join(dir, name), "utf8")))
      .filter((pid) => Number.isInteger(pid) && isPidRunning(pid));
  }

  /** The pid of the live daemon of a volume, if any. */
  daemonPid(uri: string, host: HostEnv = this.host): number | undefined {
    const file = join(host.HANGAR_RUN_DIR, "daemons", `${daemonName(uri)}.pid`);
    let pid: number;
    try {
      pid = Number(readFileSync(file, "utf8"));
    } catch {
      return undefined;
    }
    return this.daemonPids(host).includes(pid) ? pid : undefined;
  }

  /** Every unix socket file under a host's run dir. */
  socketFiles(host: HostEnv = this.host): string[] {
    const found: string[] = [];
    const walk = (dir: string) => {
      for (const name of listFiles(dir)) {
        const path = join(dir, name);
        const info = statSync(path, { throwIfNoEntry: false });
        if (info?.isDirectory()) walk(path);
        else if (info?.isSocket()) found.push(path);
      }
    };
    walk(host.HANGAR_RUN_DIR);
    return found;
  }

  /** Kills whatever daemon a failed test left, detaches the SR, removes everything. */
  async stop(): Promise<void> {
    for (const host of this.#hosts) for (const pid of this.daemonPids(host)) process.kill(pid, "SIGKILL");
    await this.volumes.call("SR.detach", { dbg, sr: this.sr }).catch(() => undefined);
    rmSync(this.root, { recursive: true, force: true });
  }
}

function makeHost(root: string, name: string): HostEnv {
  const host = { HANGAR_DATA_DIR: join(root, name, "data"), HANGAR_RUN_DIR: join(root, name, "run"), HANGAR_HOST_UUID: `${name}-${randomUUID()}` };
  mkdirSync(host.HANGAR_DATA_DIR, { recursive: true });
  mkdirSync(host.HANGAR_RUN_DIR, { recursive: true });
  return host;
}

function listFiles(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Deterministic bytes: the same seed gives the same bytes. */
export function pattern(seed: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let state = (Math.imul(seed + 1, 2654435761) >>> 0) || 1;
  for (let i = 0; i + 4 <= length; i += 4) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    buffer.writeUInt32LE(state >>> 0, i);
  }
  return buffer;
}
