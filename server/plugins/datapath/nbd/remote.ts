// The remote end of Data.copy / Data.mirror: an NBD export that must take writes over the whole range.
import { type ConnectOptions, NbdClient, redactRemote } from "../../../nbd/client.ts";

/**
 * Time limits of the connection to a remote, in seconds (fractions allowed), read by the volume daemon from
 * the environment it inherits from the toolstack. Connect + handshake should stay under the 30 s a plugin call
 * waits for the daemon, or Data.copy / Data.mirror fails with an abort instead of the reason.
 */
const TIMEOUT_VARIABLES: Record<keyof ConnectOptions, string> = {
  connectTimeoutMs: "HANGAR_NBD_CONNECT_TIMEOUT",
  handshakeTimeoutMs: "HANGAR_NBD_HANDSHAKE_TIMEOUT",
  requestTimeoutMs: "HANGAR_NBD_REQUEST_TIMEOUT",
};

/** The limits the environment sets; the client's defaults apply to the others. */
export function remoteTimeouts(env: Record<string, string | undefined> = process.env): ConnectOptions {
  const options: ConnectOptions = {};
  for (const [option, name] of Object.entries(TIMEOUT_VARIABLES) as Array<[keyof ConnectOptions, string]>) {
    const text = env[name];
    if (text === undefined || text === "") continue;
    const value = Number(text);
    if (!(value > 0)) throw new Error(`${name} must be a positive number of seconds, got ${JSON.stringify(text)}`);
    options[option] = value * 1000;
  }
  return options;
}

/** Connects to `uri` and checks that the export can take writes up to `minimumSize` bytes. */
export async function connectRemote(uri: string, minimumSize: number): Promise<NbdClient> {
  const client = await NbdClient.connect(uri, remoteTimeouts());
  const problem = client.readOnly
    ? "is read-only"
    : client.size < minimumSize
      ? `holds ${client.size} bytes, fewer than the ${minimumSize} needed`
      : undefined;
  if (problem !== undefined) {
    await client.close();
    throw new Error(`the remote ${redactRemote(uri)} ${problem}`);
  }
  return client;
}
