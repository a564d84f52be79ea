// How a plugin client reaches a plugin: by running its scripts, or over JSON-RPC.
import type { MethodName } from "./interface.ts";

export interface Transport {
  /** Where the plugin lives, for messages ("exec /root/volume/x", "jsonrpc http://..."). */
  readonly description: string;
  /** Sends encoded params (one line of JSON) and returns the parsed result, or throws a StorageError. */
  invoke(method: MethodName, paramsJson: string): Promise<unknown>;
}
