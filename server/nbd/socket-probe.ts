import net from "node:net";

/** Whether something listens on this unix socket (a stale socket file refuses the connection). */
export function socketAccepts(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.connect(socketPath);
    probe.once("connect", () => {
      probe.destroy();
      resolve(true);
    });
    probe.once("error", () => resolve(false));
  });
}

/** Waits until a unix socket accepts connections (a daemon started beside us has come up). */
export async function waitForSocket(socketPath: string, timeoutMs = 10_000, signal?: AbortSignal): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    if (await socketAccepts(socketPath)) return;
    if (Date.now() > deadline) throw new Error(`socket ${socketPath} did not come up`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
