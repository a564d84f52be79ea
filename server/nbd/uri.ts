// NBD endpoint addresses: the standard NBD URI scheme (https://github.com/NetworkBlockDevice/nbd/blob/master/doc/uri.md)
// plus the qemu legacy syntax that xapi uses in Datapath implementations (`nbd:unix:<path>:exportname=<name>`).

export const DEFAULT_NBD_PORT = 10809;

export type NbdTarget =
  | { kind: "tcp"; host: string; port: number; exportName: string; user?: string; password?: string }
  | { kind: "unix"; socketPath: string; exportName: string };

const XAPI_UNIX_PREFIX = "nbd:unix:";
const EXPORT_NAME_KEY = ":exportname=";

/**
 * Accepts `nbd://[user[:password]@]host[:port]/export`, `nbd+unix:///export?socket=PATH`,
 * `nbd:unix:PATH[:exportname=NAME]` and `nbd:HOST:PORT[:exportname=NAME]`.
 * Credentials are returned as given; plain NBD has no way to present them (that would need TLS).
 */
export function parseNbdUri(uri: string): NbdTarget {
  if (uri.startsWith(XAPI_UNIX_PREFIX)) {
    const { head, exportName } = splitExportName(uri.slice(XAPI_UNIX_PREFIX.length));
    if (head === "") throw new Error(`NBD URI without socket path: ${uri}`);
    return { kind: "unix", socketPath: head, exportName };
  }
  if (uri.startsWith("nbd:") && !uri.startsWith("nbd://")) {
    const { head, exportName } = splitExportName(uri.slice("nbd:".length));
    const match = /^(\[[^\]]+\]|[^:[\]]+):(\d+)$/.exec(head);
    if (match === null) throw new Error(`unrecognised NBD address: ${uri}`);
    return { kind: "tcp", host: stripBrackets(match[1]!), port: parsePort(match[2]!, uri), exportName };
  }

  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw new Error(`invalid NBD URI: ${uri}`);
  }
  const exportName = decodeURIComponent(url.pathname.replace(/^\//, ""));
  switch (url.protocol) {
    case "nbd:": {
      if (url.hostname === "") throw new Error(`NBD URI without host: ${uri}`);
      const target: NbdTarget = {
        kind: "tcp",
        host: stripBrackets(url.hostname),
        port: url.port === "" ? DEFAULT_NBD_PORT : parsePort(url.port, uri),
        exportName,
      };
      if (url.username !== "") target.user = decodeURIComponent(url.username);
      if (url.password !== "") target.password = decodeURIComponent(url.password);
      return target;
    }
    case "nbd+unix:": {
      const socketPath = url.searchParams.get("socket");
      if (socketPath === null || socketPath === "") throw new Error(`nbd+unix URI needs ?socket=PATH: ${uri}`);
      if (url.hostname !== "") throw new Error(`nbd+unix URI must not name a host: ${uri}`);
      return { kind: "unix", socketPath, exportName };
    }
    case "nbds:":
    case "nbds+unix:":
      throw new Error(`NBD over TLS is not supported: ${uri}`);
    default:
      throw new Error(`not an NBD URI: ${uri}`);
  }
}

/** The form xapi expects in a Datapath `Nbd` implementation: `nbd:unix:<path>:exportname=<name>`. */
export function formatXapiNbdUri(socketPath: string, exportName: string): string {
  if (socketPath === "" || socketPath.includes(EXPORT_NAME_KEY)) throw new Error(`unusable socket path: ${socketPath}`);
  return `${XAPI_UNIX_PREFIX}${socketPath}${EXPORT_NAME_KEY}${exportName}`;
}

function splitExportName(rest: string): { head: string; exportName: string } {
  // The first ":exportname=" ends the address; the name itself may contain anything.
  const at = rest.indexOf(EXPORT_NAME_KEY);
  if (at < 0) return { head: rest, exportName: "" };
  return { head: rest.slice(0, at), exportName: rest.slice(at + EXPORT_NAME_KEY.length) };
}

function stripBrackets(host: string): string {
  return host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
}

function parsePort(text: string, uri: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`bad port in NBD URI: ${uri}`);
  return port;
}
