// `hangar serve`: runs the toolstack (XenAPI over JSON-RPC and XML-RPC, HTTP and HTTPS) until stopped.
import { setTimeout as delay } from "node:timers/promises";
import { poolRole } from "../config.ts";
import { TOOLSTACK_FEATURES } from "../toolstack/features.ts";
import { serveToolstack } from "../toolstack/serve.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "run the toolstack service (XenAPI over JSON-RPC and XML-RPC)";
export const help = `Usage: hangar serve [--port N] [--https-port N] [--address ADDR]
                    [--database-url URL] [--host-address ADDR] [--pool-role master|member]

Serves XenAPI at http://ADDR:PORT/jsonrpc (JSON-RPC) and http://ADDR:PORT/ (XML-RPC), and the same over
HTTPS. State (SQLite database, TLS certificate) lives in HANGAR_DATA_DIR. On first start it creates the
pool, this host, a default file SR, and root's password (HANGAR_ROOT_PASSWORD, else generated and printed
once).

Options:
  --port N         HTTP port (default: $HANGAR_TOOLSTACK_PORT or 8080)
  --https-port N   HTTPS port, 0 to pick a free one, "off" for none (default: $HANGAR_TOOLSTACK_HTTPS_PORT or 8443)
  --address ADDR   address to bind (default: the host address when one is given, else all)
  --database-url URL     postgres:// database shared by a pool's hosts (default: $HANGAR_DATABASE_URL,
                         else SQLite in the data dir)
  --host-address ADDR    the address this host is reached at by the pool and clients (default:
                         $HANGAR_HOST_ADDRESS or 127.0.0.1)
  --pool-role ROLE       master or member (default: $HANGAR_POOL_ROLE or master). A second master refuses
                         to start while the first is alive; a master started when the old one is dead
                         takes its place.

Environment: HANGAR_TLS_CERT / HANGAR_TLS_KEY (PEM files; default: a self-signed certificate made once),
HANGAR_ROOT_PASSWORD, HANGAR_SESSION_TIMEOUT (idle seconds, default 86400), HANGAR_API_MAX_BODY (bytes of one
API call naming a live session, default 2 MiB; any other call, a login among them, gets 64 KiB),
HANGAR_BODY_IDLE_TIMEOUT (seconds an upload's body or a download's client may stall, default 60),
HANGAR_PLUGIN_ROOT, HANGAR_DATA_DIR, HANGAR_HEARTBEAT_MS (a pool host's heartbeat, default 2000; five missed ones
and it is taken for dead).
`;

/** A positive whole number from the environment (seconds, bytes), or the default. */
/** A positive whole number from the environment; undefined when unset (the service's default applies). */
function positiveOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  const number = Number(value);
  if (!Number.isSafeInteger(number) || number <= 0) throw new UsageError(`${name} must be a positive whole number, not "${value}"`);
  return number;
}

function portOption(name: string, value: string | undefined, fallback: number): number {
  const port = Number(value ?? fallback);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`${name} must be a port number (0–65535), not "${value}"`);
  return port;
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, {
    port: { type: "string" },
    "https-port": { type: "string" },
    address: { type: "string" },
    "database-url": { type: "string" },
    "host-address": { type: "string" },
    "pool-role": { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const httpsValue = values["https-port"] ?? process.env.HANGAR_TOOLSTACK_HTTPS_PORT;
  // The flags stand for their environment variables (the data layer reads HANGAR_DATABASE_URL).
  if (values["database-url"] !== undefined) process.env.HANGAR_DATABASE_URL = values["database-url"];
  const hostAddress = values["host-address"] ?? (process.env.HANGAR_HOST_ADDRESS || undefined);
  let role: "master" | "member";
  try {
    role = poolRole(values["pool-role"] ?? process.env.HANGAR_POOL_ROLE);
  } catch (error) {
    throw new UsageError((error as Error).message.replace("HANGAR_POOL_ROLE", "--pool-role"));
  }
  const address = values.address ?? hostAddress;
  const service = await serveToolstack({
    port: portOption("--port", values.port ?? process.env.HANGAR_TOOLSTACK_PORT, 8080),
    httpsPort: httpsValue === "off" ? null : portOption("--https-port", httpsValue, 8443),
    address,
    hostAddress,
    poolRole: role,
    tlsCert: process.env.HANGAR_TLS_CERT,
    tlsKey: process.env.HANGAR_TLS_KEY,
    rootPassword: process.env.HANGAR_ROOT_PASSWORD,
    sessionTimeoutMs: (positiveOption("HANGAR_SESSION_TIMEOUT", process.env.HANGAR_SESSION_TIMEOUT) ?? 24 * 60 * 60) * 1000,
    maxApiBody: positiveOption("HANGAR_API_MAX_BODY", process.env.HANGAR_API_MAX_BODY),
    features: TOOLSTACK_FEATURES,
    onGeneratedPassword: (password) =>
      process.stdout.write(`root password (shown once, stored hashed; set HANGAR_ROOT_PASSWORD to choose one): ${password}\n`),
  });
  const where = address ?? "0.0.0.0";
  process.stdout.write(
    `toolstack listening: http://${where}:${service.httpPort}/` + (service.httpsPort === null ? "" : `, https://${where}:${service.httpsPort}/`) + "\n",
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  });
  const closed = await Promise.race([service.close().then(() => true), delay(SHUTDOWN_LIMIT_MS, false, { ref: false })]);
  if (!closed) {
    process.stderr.write(`hangar serve: the toolstack did not close within ${SHUTDOWN_LIMIT_MS / 1000} s (its database or a plugin not answering); exiting anyway\n`);
    process.exit(1);
  }
  return 0;
}

/** A stop that hangs (a database that no longer answers) still ends the process, as a service manager would. */
const SHUTDOWN_LIMIT_MS = 15_000;
