// The remote end of Data.copy / Data.mirror: an NBD export that must take writes over the whole range.
import { NbdClient } from "../../../nbd/client.ts";
import { redactRemote } from "./operations.ts";

/** Connects to `uri` and checks that the export can take writes up to `minimumSize` bytes. */
export async function connectRemote(uri: string, minimumSize: number): Promise<NbdClient> {
  const client = await NbdClient.connect(uri);
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
