// `hangar serve`: the toolstack on HTTP and HTTPS. The certificate is HANGAR_TLS_CERT / HANGAR_TLS_KEY, or a
// self-signed one made on first start and kept in the data dir (as a fresh XenServer host makes its own).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";
import { enableSpawner } from "../storage/spawner.ts";
import { createHandler, type HttpOptions } from "./http.ts";
import { type Feature, openToolstack, TASK_STOP_MS, type Toolstack, type ToolstackOptions } from "./toolstack.ts";

export interface ServeOptions extends ToolstackOptions, HttpOptions {
  /** 0 picks a free port. */
  port: number;
  /** null: no HTTPS. */
  httpsPort: number | null;
  /** Address to bind (default all). */
  address?: string;
  tlsCert?: string;
  tlsKey?: string;
  features?: Feature[];
  /** How long a connection may take to send a request's headers, idle ones included (default 20 s). */
  headersTimeoutMs?: number;
}

/**
 * Connection limits of both servers. A connection that sends no request, or its headers too slowly, is closed
 * after the headers timeout (Node's own default, 60 s checked every 30 s, held them 90 s); an idle kept-alive
 * one after 5 s. There is no limit on a whole request: an upload takes as long as it takes, and its body has
 * its own idle timeout (HANGAR_BODY_IDLE_TIMEOUT); event.from holds its answer, not its request.
 */
function connectionLimits(options: ServeOptions) {
  const headersTimeout = options.headersTimeoutMs ?? 20_000;
  return { headersTimeout, requestTimeout: 0, keepAliveTimeout: 5_000, connectionsCheckingInterval: Math.min(1_000, headersTimeout) };
}

export interface RunningToolstack {
  ts: Toolstack;
  http: Server;
  https: Server | null;
  httpPort: number;
  httpsPort: number | null;
  close(): Promise<void>;
}

async function tlsMaterial(dataDir: string, certPath?: string, keyPath?: string): Promise<{ cert: string; key: string }> {
  if (certPath || keyPath) {
    if (!certPath || !keyPath) throw new Error("HANGAR_TLS_CERT and HANGAR_TLS_KEY go together");
    return { cert: readFileSync(certPath, "utf8"), key: readFileSync(keyPath, "utf8") };
  }
  const dir = join(dataDir, "tls");
  const cert = join(dir, "server.crt");
  const key = join(dir, "server.key");
  if (!existsSync(cert) || !existsSync(key)) {
    const name = hostname();
    const made = await generate([{ name: "commonName", value: name }], {
      keySize: 2048,
      notAfterDate: new Date(Date.now() + 10 * 365 * 24 * 60 * 60 * 1000),
      extensions: [{ name: "subjectAltName", altNames: [{ type: 2, value: name }, { type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }] }],
    });
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(key, made.private, { mode: 0o600 });
    writeFileSync(cert, made.cert);
  }
  return { cert: readFileSync(cert, "utf8"), key: readFileSync(key, "utf8") };
}

function listen(server: Server, port: number, address?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, address, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export async function serveToolstack(options: ServeOptions): Promise<RunningToolstack> {
  enableSpawner();
  const ts = await openToolstack(options, options.features ?? []);
  try {
    const routes = Object.assign({}, ...(options.features ?? []).map((feature) => feature.routes ?? {}), options.routes);
    const handler = createHandler(ts, { ...options, routes });
    const http = createHttpServer(connectionLimits(options), handler);
    // `Expect: 100-continue` (curl -T) is answered by the handler: an upload refused is refused before its body.
    http.on("checkContinue", handler);
    const httpPort = await listen(http, options.port, options.address);
    let https: Server | null = null;
    let httpsPort: number | null = null;
    if (options.httpsPort !== null) {
      https = createHttpsServer({ ...(await tlsMaterial(ts.dataDir, options.tlsCert, options.tlsKey)), ...connectionLimits(options) }, handler);
      https.on("checkContinue", handler);
      httpsPort = await listen(https, options.httpsPort, options.address);
    }
    await ts.pool.announce({ http: httpPort, https: httpsPort });
    return {
      ts,
      http,
      https,
      httpPort,
      httpsPort,
      close: async () => {
        const stop = (server: Server | null) =>
          new Promise<void>((resolve) => {
            if (server === null) return resolve();
            server.close(() => resolve());
            server.closeAllConnections();
          });
        // Transfers first: their tasks then fail as interrupted, not as archives cut short by a closed connection.
        await ts.tasks.stop(TASK_STOP_MS);
        await Promise.all([stop(http), stop(https)]);
        await ts.close();
      },
    };
  } catch (error) {
    await ts.close();
    throw error;
  }
}
