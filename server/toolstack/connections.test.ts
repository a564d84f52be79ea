// Connections that hold the service without using it: silent ones, headers sent a byte at a time, idle
// kept-alive ones. Each is closed after its timeout, and the service serves on meanwhile.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { test } from "node:test";
import { serveTestToolstack } from "./testing.ts";

/** A raw connection; answers when it was closed by the server (ms after it opened), or "open" after `withinMs`. */
function held(port: number, send: string, withinMs: number): Promise<number | "open"> {
  return new Promise((resolve) => {
    const opened = Date.now();
    const socket: Socket = connect(port, "127.0.0.1", () => socket.write(send));
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve("open");
    }, withinMs);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(Date.now() - opened);
    });
  });
}

test("silent connections, half-sent headers and idle kept-alive ones are closed after their timeouts", async (t) => {
  const service = await serveTestToolstack(t, { headersTimeoutMs: 1000 });
  const [silent, halfHeaders, keptAlive] = await Promise.all([
    held(service.httpPort, "", 10_000),
    held(service.httpPort, "GET /jsonrpc HTTP/1.1\r\nHost: x\r\n", 10_000),
    held(service.httpPort, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 10_000),
  ]);
  // Before: Node's defaults held the first two for 90 s.
  assert.ok(typeof silent === "number" && silent < 3000, `a silent connection: ${silent}`);
  assert.ok(typeof halfHeaders === "number" && halfHeaders < 3000, `headers never finished: ${halfHeaders}`);
  assert.ok(typeof keptAlive === "number" && keptAlive >= 4000 && keptAlive < 8000, `an idle kept-alive connection: ${keptAlive}`);
});
