// Long-lived helpers of short-lived plugin calls (NBD servers, copy and mirror workers): started detached
// by one call, found again by later calls through a pid file and a control socket, stopped explicitly.
import { closeSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { nodeBinary } from "../../config.ts";
import { isPidRunning } from "../filesr/liveness.ts";
import { daemonLog, daemonsDir, openDaemonLog } from "./daemon-log.ts";
import { withLockFile } from "./lock-file.ts";
import { spawnDetached } from "../../detached-process.ts";

export interface Daemon {
  name: string;
  pid: number;
  /** HTTP control socket of the daemon. */
  controlSocket: string;
}

function paths(name: string) {
  const dir = daemonsDir();
  return { dir, pidFile: join(dir, `${name}.pid`), controlSocket: join(dir, `${name}.ctl`), log: daemonLog(name), lock: join(dir, `${name}.lock`) };
}


/** How long a daemon has to answer on its control socket once started. */
const START_MS = 30_000;

/** The running daemon of that name, if its process lives and its control socket answers. */
export async function findDaemon(name: string): Promise<Daemon | undefined> {
  const p = paths(name);
  let pid: number;
  try {
    pid = Number(readFileSync(p.pidFile, "utf8"));
  } catch {
    return undefined;
  }
  if (!Number.isInteger(pid) || !isPidRunning(pid)) return undefined;
  try {
    await control({ name, pid, controlSocket: p.controlSocket }, "ping", {});
  } catch {
    return undefined;
  }
  return { name, pid, controlSocket: p.controlSocket };
}

/**
 * Starts `node script ...args` detached unless a live daemon of that name exists. The script must call
 * `serveControl(name, handlers)`. A lock file keeps two concurrent callers from starting two daemons.
 */
export async function ensureDaemon(name: string, script: string, args: string[], env: Record<string, string> = {}): Promise<Daemon> {
  const p = paths(name);
  mkdirSync(p.dir, { recursive: true });
  await withLockFile(p.lock, async () => {
    if ((await findDaemon(name)) !== undefined) return;
    rmSync(p.controlSocket, { force: true });
    const log = openDaemonLog(name);
    const child = spawnDetached(nodeBinary(), [script, ...args], {
      stdio: ["ignore", log, log],
      env: { ...process.env, ...env, HANGAR_DAEMON_NAME: name },
    });
    closeSync(log);
    child.unref();
    writeFileSync(p.pidFile, String(child.pid));
    const ended = () => child.exitCode !== null || !isPidRunning(child.pid ?? -1);
    for (const deadline = Date.now() + START_MS; Date.now() < deadline; ) {
      if (existsSync(p.controlSocket) && (await findDaemon(name)) !== undefined) return;
      if (ended()) break;
      await sleep(20);
    }
    const why = ended() ? "it ended" : `no answer within ${START_MS / 1000} s`;
    // Not left to come up later, unknown to the call that failed: its process group goes (it leads one).
    try {
      if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
    } catch {
      // Gone already.
    }
    rmSync(p.pidFile, { force: true });
    const tail = existsSync(p.log) ? readFileSync(p.log, "utf8").slice(-2000) : "";
    throw new Error(`daemon ${name} did not start (${why})${tail ? `: ${tail}` : ""}`);
  });
  const daemon = await findDaemon(name);
  if (daemon === undefined) throw new Error(`daemon ${name} is not running`);
  return daemon;
}

/** Asks the daemon to stop, then makes sure it has; removes its files. Safe when it is not running. */
export async function stopDaemon(name: string): Promise<void> {
  const p = paths(name);
  const daemon = await findDaemon(name);
  let pid = daemon?.pid;
  if (pid === undefined) {
    try {
      pid = Number(readFileSync(p.pidFile, "utf8"));
    } catch {
      pid = undefined;
    }
  }
  if (daemon !== undefined) await control(daemon, "stop", {}).catch(() => undefined);
  if (pid !== undefined && Number.isInteger(pid)) {
    for (let waited = 0; isPidRunning(pid) && waited < 10_000; waited += 20) await sleep(20);
    if (isPidRunning(pid)) process.kill(pid, "SIGKILL");
  }
  rmSync(p.pidFile, { force: true });
  rmSync(p.controlSocket, { force: true });
}

/** Sends one control command; the daemon answers JSON or an error message with a non-200 status. */
export function control<T = unknown>(daemon: Daemon, command: string, body: unknown): Promise<T> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: daemon.controlSocket,
        path: `/${command}`,
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        signal: AbortSignal.timeout(30_000),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode === 200) resolve(JSON.parse(text) as T);
          else reject(new Error(text || `daemon ${daemon.name}: ${command} failed (${res.statusCode})`));
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

