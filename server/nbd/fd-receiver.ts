// SCM_RIGHTS intake for Datapath.import_activate (VDI_MIRROR_IN): a peer passes the fd of a connected
// socket over a unix socket, and that socket becomes the server end of an NBD connection.
// Node cannot receive SCM_RIGHTS itself, so fd-receiver.py receives the fd and forwards it to us over
// Node's own child_process IPC channel, which delivers it as a net.Socket. The NBD traffic then flows on
// that socket directly in this process; the helper copies no data.

import { spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import net from "node:net";
import { fileURLToPath } from "node:url";

/** Where received sockets go; NbdServer fits. */
export interface SocketSink {
  serveSocket(socket: net.Socket): void;
}

export interface FdReceiver {
  readonly pid: number;
  readonly listenPath: string;
  /** Stops the helper and removes the listening socket. */
  stop(): Promise<void>;
}

const HELPER = fileURLToPath(new URL("./fd-receiver.py", import.meta.url));
const STDERR_KEPT = 4096;

export async function startFdReceiver(listenPath: string, sink: SocketSink): Promise<FdReceiver> {
  const child = spawn("python3", [HELPER, listenPath], { stdio: ["ignore", "ignore", "pipe", "ipc"] });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (text: string) => {
    stderr = (stderr + text).slice(-STDERR_KEPT);
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));

  await new Promise<void>((resolve, reject) => {
    const onMessage = (message: unknown): void => {
      if ((message as { fdReceiver?: unknown } | null)?.fdReceiver !== "ready") return;
      cleanup();
      resolve();
    };
    const onExit = (code: number | null, signal: string | null): void => {
      cleanup();
      reject(new Error(`fd receiver exited before it was ready (${signal ?? code}): ${stderr.trim()}`));
    };
    const onError = (error: Error): void => {
      cleanup();
      reject(error);
    };
    const cleanup = (): void => {
      child.off("message", onMessage).off("exit", onExit).off("error", onError);
    };
    child.on("message", onMessage).once("exit", onExit).once("error", onError);
  });

  child.on("message", (_message, handle) => {
    if (!(handle instanceof net.Socket)) return;
    try {
      sink.serveSocket(handle);
    } catch {
      handle.destroy(); // one unusable connection must not take the process down
    }
  });

  return {
    pid: child.pid!,
    listenPath,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      await rm(listenPath, { force: true });
    },
  };
}
