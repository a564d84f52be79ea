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
