// The daemon side of daemon.ts: an HTTP server on the control socket dispatching POST /<command>.
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { daemonsDir } from "./daemon-log.ts";

export type ControlHandlers = Record<string, (body: unknown) => Promise<unknown> | unknown>;

/** Serves control commands; `ping` and `stop` are built in (`stop` runs `onStop` and exits). */
export async function serveControl(name: string, handlers: ControlHandlers, onStop: () => Promise<void>): Promise<void> {
  const socketPath = join(daemonsDir(), `${name}.ctl`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    server.close();
    try {
      await onStop();
    } finally {
      rmSync(socketPath, { force: true });
      process.exit(0);
    }
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const command = (req.url ?? "/").slice(1);
    try {
      const body = chunks.length === 0 ? {} : JSON.parse(Buffer.concat(chunks).toString("utf8"));
      let result: unknown;
      if (command === "ping") result = { pid: process.pid };
      else if (command === "stop") result = null;
      else {
        const handler = handlers[command];
        if (handler === undefined) throw new Error(`unknown control command ${command}`);
        result = await handler(body);
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(result ?? null));
      if (command === "stop") setImmediate(stop);
    } catch (error) {
      res.writeHead(500, { "content-type": "text/plain" }).end((error as Error).message);
    }
  });
  rmSync(socketPath, { force: true });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
}
