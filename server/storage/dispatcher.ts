// The server side of the method table: one dispatcher per plugin turns a call (script entry or JSON-RPC
// request) into a typed function call, and any failure into the interface's error object.
import { readFileSync, writeSync } from "node:fs";
import { decodeParams } from "./codec.ts";
import { StorageError, storageErrors } from "./errors.ts";
import { METHOD_NAMES, type MethodName, type Params, type Result, lookupMethod } from "./interface.ts";
import { parseWireJson, stringifyWireJson } from "./json.ts";

export type PluginImplementation = {
  [M in MethodName]?: (params: Params<M>) => Promise<Result<M>> | Result<M>;
};

export type DispatchOutcome = { ok: true; json: string } | { ok: false; json: string; error: StorageError };

/**
 * An implementation whose handlers, but for `eager`, live in a module loaded on first use: a plugin entry
 * answering Plugin.Query then never loads the code (and libraries) that the other methods need.
 */
export function deferPlugin(eager: PluginImplementation, load: () => Promise<PluginImplementation>): PluginImplementation {
  let loaded: Promise<PluginImplementation> | undefined;
  const impl: Record<string, (params: never) => Promise<unknown>> = {};
  for (const name of METHOD_NAMES) {
    impl[name] = async (params) => {
      const handler = (await (loaded ??= load()))[name] as ((p: never) => unknown) | undefined;
      if (handler === undefined) throw storageErrors.unimplemented(name);
      return handler(params);
    };
  }
  return { ...impl, ...eager } as PluginImplementation;
}

/** Runs one call; never throws. `method` may be cased as scripts are named (`Plugin.Query`). */
export async function dispatch(impl: PluginImplementation, method: string, params: unknown): Promise<DispatchOutcome> {
  try {
    const name = lookupMethod(method);
    const handler = name === undefined ? undefined : (impl[name] as ((p: unknown) => unknown) | undefined);
    if (name === undefined || handler === undefined) throw storageErrors.unimplemented(method);
    const decoded = decodeParams(name, params);
    // Results are typed by the method table and built by our own code: not validated again here (that cost
    // grows with e.g. SR.ls of thousands of volumes); every caller's client validates what it receives.
    return { ok: true, json: stringifyWireJson(await handler(decoded)) };
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
  // Synchronous stdin and stdout: a plugin call is one line in, one line out, and the stream machinery
  // costs more than the call itself.
  const input = readFileSync(0, "utf8");
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
  writeAll(1, `${outcome.json}\n`);
  process.exit(outcome.ok ? 0 : 1);
}

/** writeSync to a pipe may write part of the text (EAGAIN on a non-blocking pipe): loop until all is out. */
function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let offset = 0; offset < bytes.length; ) {
    try {
      offset += writeSync(fd, bytes, offset);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EPIPE") return; // the caller stopped reading: nobody is left to tell
      if (code !== "EAGAIN") throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }
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
