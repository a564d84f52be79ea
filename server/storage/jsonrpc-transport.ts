// JSON-RPC v1 for plugins served as daemons: {"method","params":[{...}],"id"} over HTTP, on TCP or a unix
// socket. Errors come back as the same error objects scripts print.
import { request } from "node:http";
import * as z from "zod/mini";
import { BACKEND_FAILURE, CALLER_CODES, StorageError, parseWireError } from "./errors.ts";
import { DEFAULT_TIMEOUT_MS } from "./exec-transport.ts";
import { parseWireJson } from "./json.ts";
import type { Transport } from "./transport.ts";

export interface JsonRpcEndpoint {
  /** http://host:port/path, or unix:///path/to.sock (HTTP over a unix socket). */
  url: string;
  timeoutMs?: number;
  /** Sent with every call (a pool's credentials: the plugins of another host are reached this way). */
  headers?: Record<string, string>;
}

const ZEnvelope = z.object({ result: z.unknown(), error: z.unknown(), id: z.unknown() });

export function createJsonRpcTransport(plugin: string, endpoint: JsonRpcEndpoint): Transport {
  const target = parseEndpoint(endpoint.url);
  const timeoutMs = endpoint.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  let nextId = 1;
  return {
    description: `jsonrpc ${endpoint.url}`,
    async invoke(method, paramsJson) {
      const id = nextId++;
      const body = `{"method":${JSON.stringify(method)},"params":[${paramsJson}],"id":${id}}`;
      const failed = (why: string) =>
        new StorageError(CALLER_CODES.transportFailed, [plugin, method, why], `plugin ${plugin} ${method} (${endpoint.url}): ${why}`);
      let text: string;
      try {
        text = await post(target, body, timeoutMs, endpoint.headers);
      } catch (error) {
        throw failed((error as Error).message);
      }
      let envelope;
      try {
        envelope = ZEnvelope.parse(parseWireJson(text));
      } catch {
        throw failed(`not a JSON-RPC response: ${text.slice(0, 200)}`);
      }
      if (envelope.error !== null && envelope.error !== undefined) {
        const error = parseWireError(envelope.error);
        if (error !== undefined) throw error;
        throw new StorageError(BACKEND_FAILURE, [typeof envelope.error === "string" ? envelope.error : JSON.stringify(envelope.error)]);
      }
      if (envelope.id !== id) throw failed(`response id ${JSON.stringify(envelope.id)} does not match request id ${id}`);
      return envelope.result;
    },
  };
}

interface Target {
  socketPath?: string;
  host?: string;
  port?: number;
  path: string;
}

function parseEndpoint(url: string): Target {
  const parsed = new URL(url);
  if (parsed.protocol === "unix:") return { socketPath: decodeURIComponent(parsed.pathname), path: "/" };
  if (parsed.protocol !== "http:") throw new Error(`unsupported JSON-RPC endpoint ${url} (use http:// or unix://)`);
  return { host: parsed.hostname, port: Number(parsed.port || 80), path: `${parsed.pathname}${parsed.search}` };
}

function post(target: Target, body: string, timeoutMs: number, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        ...target,
        method: "POST",
        headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        res.on("error", reject);
      },
    );
    req.on("error", (error) => reject(error.name === "AbortError" ? new Error(`no answer within ${timeoutMs / 1000} s`) : error));
    req.end(body);
  });
}
