// The server side of the method table: one dispatcher per plugin turns a call (script entry or JSON-RPC
// request) into a typed function call, and any failure into the interface's error object.
import { decodeParams, encodeResult } from "./codec.ts";
import { StorageError, storageErrors } from "./errors.ts";
import { type MethodName, type Params, type Result, lookupMethod } from "./interface.ts";
import { parseWireJson, stringifyWireJson } from "./json.ts";

export type PluginImplementation = {
  [M in MethodName]?: (params: Params<M>) => Promise<Result<M>> | Result<M>;
};

export type DispatchOutcome = { ok: true; json: string } | { ok: false; json: string; error: StorageError };

/** Runs one call; never throws. `method` may be cased as scripts are named (`Plugin.Query`). */
export async function dispatch(impl: PluginImplementation, method: string, params: unknown): Promise<DispatchOutcome> {
  try {
    const name = lookupMethod(method);
    const handler = name === undefined ? undefined : (impl[name] as ((p: unknown) => unknown) | undefined);
    if (name === undefined || handler === undefined) throw storageErrors.unimplemented(method);
    const decoded = decodeParams(name, params);
    const result = (await handler(decoded)) as Result<typeof name>;
    return { ok: true, json: encodeResult(name, result) };
  } catch (error) {
    const storageError = toStorageError(error);
    return { ok: false, json: stringifyWireJson(storageError.toWire()), error: storageError };
  }
}

function toStorageError(error: unknown): StorageError {
  if (error instanceof StorageError) {
    // Parameter problems found here are the plugin's answer: report them as a backend failure.
    return error.code === "INCORRECT_PARAMETERS" ? storageErrors.backendFailure(`invalid parameters: ${error.params.slice(1).join("; ")}`) : error;
  }
  return storageErrors.backendFailure(error instanceof Error ? error.message : String(error));
}

/**
 * The body of an executable entry (`<dir>/<Interface>.<method> --json`): params from stdin, the bare result
 * on stdout and exit 0, or the error object on stdout and exit 1. Stack traces go to stderr only.
 */
export async function runScriptEntry(impl: PluginImplementation, method: string): Promise<never> {
  const input = await readStdin();
  let params: unknown;
  try {
    params = parseWireJson(input);
  } catch (error) {
    params = undefined;
    process.stderr.write(`${method}: stdin is not JSON: ${(error as Error).message}\n`);
  }
  const outcome =
    params === undefined
      ? { ok: false as const, json: stringifyWireJson(storageErrors.backendFailure("parameters on stdin are not valid JSON").toWire()) }
      : await dispatch(impl, method, params);
  if (!outcome.ok && "error" in outcome && outcome.error.stack !== undefined) process.stderr.write(`${outcome.error.stack}\n`);
  await new Promise<void>((resolve) => process.stdout.write(`${outcome.json}\n`, () => resolve()));
  process.exit(outcome.ok ? 0 : 1);
}

/** Answers one JSON-RPC v1 request body, for plugins served as daemons. */
export async function handleJsonRpc(impl: PluginImplementation, body: string): Promise<string> {
  let request: { method?: unknown; params?: unknown; id?: unknown };
  try {
    request = parseWireJson(body) as typeof request;
  } catch {
    return `{"result":null,"error":${stringifyWireJson(storageErrors.backendFailure("request is not JSON").toWire())},"id":null}`;
  }
  const id = stringifyWireJson(request?.id ?? null);
  const params = Array.isArray(request?.params) ? request.params[0] : undefined;
  const outcome = await dispatch(impl, typeof request?.method === "string" ? request.method : "", params);
  return outcome.ok ? `{"result":${outcome.json},"error":null,"id":${id}}` : `{"result":null,"error":${outcome.json},"id":${id}}`;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
