// A typed client for one plugin: encodes params by the method table, sends them through a transport, and
// accepts only results that match the method's result type.
import { decodeParams, decodeResult } from "./codec.ts";
import { type MethodName, type Params, type Result } from "./interface.ts";
import { stringifyWireJson } from "./json.ts";
import type { Transport } from "./transport.ts";

export interface PluginClient {
  /** The plugin's name in messages: its directory in the plugin root. */
  readonly name: string;
  readonly transport: Transport;
  call<M extends MethodName>(method: M, params: Params<M>): Promise<Result<M>>;
}

export function createPluginClient(name: string, transport: Transport): PluginClient {
  return {
    name,
    transport,
    async call(method, params) {
      const encoded = stringifyWireJson(decodeParams(method, params));
      return decodeResult(method, await transport.invoke(method, encoded), name);
    },
  };
}
