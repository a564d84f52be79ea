// NbdServer: serves named exports over unix sockets, TCP, or sockets handed to it (fd passing).
// The server never closes backends: whoever added an export owns it.

import { rm } from "node:fs/promises";
import net from "node:net";
import type { ExportBackend } from "./backend.ts";
import { BufferPool } from "../buffer-pool.ts";
import { NbdConnection } from "./connection.ts";
import type { ExportCatalog, ExportEntry } from "./negotiation.ts";
import { MAX_STRING_SIZE } from "./protocol.ts";
import { SocketReader } from "./socket-reader.ts";
import { socketAccepts } from "./socket-probe.ts";

/** Idle I/O buffers kept for reuse across all connections. */
const POOL_LIMIT = 64 * 1024 * 1024;

export type ListenTarget = { socketPath: string } | { host?: string; port: number };
export type ListenAddress = { socketPath: string } | { host: string; port: number };

export interface ExportOptions {
  /** Shown by NBD_OPT_LIST and NBD_INFO_DESCRIPTION (e.g. `nbdinfo --list`). */
  description?: string;
}

export class NbdServer {
  readonly #exports = new Map<string, ExportEntry>();
  readonly #listeners: { server: net.Server; socketPath: string | null }[] = [];
  readonly #connections = new Set<NbdConnection>();
  readonly #pool = new BufferPool(POOL_LIMIT);
  // What connections see of the server during the handshake.
  readonly #catalog: ExportCatalog = {
    lookup: (name) => this.#exports.get(name),
    entries: () => this.#exports.values(),
    shuttingDown: false,
  };

  get connectionCount(): number {
    return this.#connections.size;
  }

  get exportNames(): string[] {
    return [...this.#exports.keys()];
  }

  addExport(name: string, backend: ExportBackend, options: ExportOptions = {}): void {
    if (Buffer.byteLength(name, "utf8") > MAX_STRING_SIZE || name.includes("\0")) {
      throw new Error(`invalid NBD export name "${name}"`);
    }
    if (this.#exports.has(name)) throw new Error(`NBD export "${name}" already exists`);
    this.#exports.set(name, { name, backend, description: options.description ?? "" });
  }

  /** Unpublishes an export and gracefully closes the connections using it. */
  async removeExport(name: string): Promise<void> {
    if (!this.#exports.delete(name)) return;
    const users = [...this.#connections].filter((connection) => connection.exportName === name);
    await Promise.all(users.map((connection) => connection.shutdown()));
  }

  /** Starts accepting connections; may be called several times (e.g. a unix socket and a TCP port). */
  async listen(target: ListenTarget): Promise<ListenAddress> {
    if (this.#catalog.shuttingDown) throw new Error("NBD server is closed");
    // pauseOnConnect: nothing is read before serveSocket adopts the socket.
    const server = net.createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true }, (socket) => this.serveSocket(socket));
    if ("socketPath" in target) {
      await listenUnix(server, target.socketPath);
      this.#listeners.push({ server, socketPath: target.socketPath });
      return { socketPath: target.socketPath };
    }
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(target.port, target.host ?? "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.#listeners.push({ server, socketPath: null });
    const address = server.address() as net.AddressInfo;
    return { host: address.address, port: address.port };
  }

  /**
   * Serves a connected plain (non-TLS) socket, e.g. one received by fd passing; the handshake starts now.
   * The server takes the socket over: the caller must not use it afterwards.
   */
  serveSocket(socket: net.Socket): void {
    if (socket.connecting) {
      socket.once("connect", () => this.serveSocket(socket));
      return;
    }
    if (this.#catalog.shuttingDown || socket.destroyed) {
      socket.destroy();
      return;
    }
    const adopted = SocketReader.adopt(socket, { allowHalfOpen: true });
    const connection = new NbdConnection(adopted.socket, adopted.reader, this.#catalog, this.#pool);
    this.#connections.add(connection);
    void connection.serve().finally(() => this.#connections.delete(connection));
  }

  /** Stops listening, finishes in-flight requests, closes every connection and removes unix sockets. */
  async close(): Promise<void> {
    this.#catalog.shuttingDown = true;
    const listeners = this.#listeners.splice(0);
    const stopped = listeners.map(({ server }) => new Promise<void>((resolve) => server.close(() => resolve())));
    await Promise.all([...this.#connections].map((connection) => connection.shutdown()));
    await Promise.all(stopped);
    await Promise.all(listeners.map(({ socketPath }) => (socketPath === null ? undefined : rm(socketPath, { force: true }))));
  }
}

/** Binds a unix socket, replacing a stale socket file left by a dead process (but never a live one). */
async function listenUnix(server: net.Server, socketPath: string): Promise<void> {
  const attempt = (): Promise<void> =>
    new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
  try {
    await attempt();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EADDRINUSE" || (await socketAccepts(socketPath))) throw error;
    await rm(socketPath, { force: true });
    await attempt();
  }
}

