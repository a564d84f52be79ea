// This host's plugins served to the rest of the pool (and to the console) over JSON-RPC, the interface the
// plugins themselves speak: GET /plugins lists the registry, POST /plugins/<kind>/<dir> relays one call
// to that plugin here and answers its result or its error object. Callers show the pool's secret
// (X-Hangar-Pool-Secret: other hosts) or a session (session_id, as for /export: the console).
import type { IncomingMessage, ServerResponse } from "node:http";
import { timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { StorageError, storageErrors } from "../storage/errors.ts";
import { METHOD_NAMES, type MethodName } from "../storage/interface.ts";
import { parseWireJson, stringifyWireJson } from "../storage/json.ts";
import { listingOf, type PoolHostEndpoint } from "../storage/pool-registry.ts";
import { clientAddress, type Route, readBodyOr413, send } from "./http.ts";
import { authorize } from "./rbac/authorize.ts";
import { httpAction, READING_PLUGIN_CALLS } from "./rbac/http-actions.ts";
import type { Session } from "./sessions.ts";
import type { XenApiError } from "../xenapi/errors.ts";
import { hostUrl } from "../xenapi/hosts.ts";
import type { StoredObject } from "./objects.ts";
import type { Toolstack } from "./toolstack.ts";
import { argumentsOf, authenticate, ResourceRefusal } from "./transfer/http-resource.ts";

export const POOL_SECRET_HEADER = "x-hangar-pool-secret";
/** A call relayed to a plugin is small: its parameters, never disk data. */
const MAX_CALL_BODY = 1024 * 1024;

const ZCall = z.object({ method: z.enum(METHOD_NAMES as [MethodName, ...MethodName[]]), params: z.tuple([z.unknown()]), id: z.unknown() });

/** How this host reaches the toolstack of another host of the pool (to call its plugins). */
export async function poolEndpoint(ts: Toolstack, host: StoredObject): Promise<PoolHostEndpoint> {
  return { baseUrl: hostUrl(host.record), headers: { [POOL_SECRET_HEADER]: await ts.pool.secret() } };
}

/** Who calls: another host of the pool (its secret), a session, or nobody known (undefined). */
export async function admitted(ts: Toolstack, request: IncomingMessage, url: URL): Promise<"pool" | Session | undefined> {
  const shown = request.headers[POOL_SECRET_HEADER];
  if (typeof shown === "string") {
    const secret = Buffer.from(await ts.pool.secret());
    const given = Buffer.from(shown);
    return given.length === secret.length && timingSafeEqual(given, secret) ? "pool" : undefined;
  }
  try {
    const caller = await authenticate(ts, request, argumentsOf(request, url));
    await caller.release();
    return caller.session;
  } catch (error) {
    if (error instanceof ResourceRefusal) return undefined;
    throw error;
  }
}

export const pluginServiceRoute: Route = async (ts, request, response, url) => {
  const caller = await admitted(ts, request, url);
  if (caller === undefined) {
    request.resume();
    return send(response, 401, "text/plain", "the plugins of a pool host need the pool's secret or a session (session_id)\n");
  }
  const [, , kind, dir, ...rest] = url.pathname.split("/");
  if (kind === undefined) {
    if (request.method !== "GET") return send(response, 405, "text/plain", "GET /plugins lists this host's plugins\n");
    return send(response, 200, "application/json", JSON.stringify(listingOf(await ts.storage.registry())));
  }
  if (request.method !== "POST" || dir === undefined || rest.length > 0 || (kind !== "volume" && kind !== "datapath")) {
    request.resume();
    return send(response, 404, "text/plain", "POST /plugins/<volume|datapath>/<plugin> with a JSON-RPC call\n");
  }
  const text = await readBodyOr413(request, response, MAX_CALL_BODY);
  if (text === undefined) return;
  let call: z.infer<typeof ZCall>;
  try {
    call = ZCall.parse(parseWireJson(text));
  } catch {
    return answer(response, null, { error: storageErrors.backendFailure("not a JSON-RPC call of the storage interface") });
  }
  if (caller !== "pool") {
    // A reading call for anyone logged in; one that changes storage, behind every XenAPI check, for the pool administrator.
    const action = httpAction("POST", url.pathname, !READING_PLUGIN_CALLS.has(call.method))!;
    try {
      authorize(caller, `${action.permission}/${call.method.toLowerCase()}`, action.role);
    } catch (error) {
      await ts.audit.record({ session: caller, client: clientAddress(request), decision: "DENIED", kind: "HTTP", action: action.permission, args: [["method", call.method]] });
      return send(response, 403, "text/plain", `${(error as XenApiError).description.join(" ")}\n`);
    }
  }
  const plugin = (await ts.storage.registry()).find(decodeURIComponent(dir), kind);
  if (plugin === undefined) return answer(response, call.id, { error: storageErrors.backendFailure(`no ${kind} plugin ${decodeURIComponent(dir)} on this host`) });
  // A change made behind XenAPI is audited as the HTTP action it came by.
  const audit = async (error?: string) => {
    if (caller !== "pool" && !READING_PLUGIN_CALLS.has(call.method)) await ts.audit.record({ session: caller, client: clientAddress(request), decision: "ALLOWED", error, kind: "HTTP", action: "http/post_plugins/write", args: [["method", call.method]] });
  };
  try {
    // Relayed as given: the caller's client checks the result against the method's type itself.
    const result = await plugin.client.transport.invoke(call.method, stringifyWireJson(call.params[0]));
    await audit();
    return answer(response, call.id, { result });
  } catch (error) {
    const failure = error instanceof StorageError ? error : storageErrors.backendFailure(error instanceof Error ? error.message : String(error));
    await audit(failure.code);
    return answer(response, call.id, { error: failure });
  }
};

function answer(response: ServerResponse, id: unknown, outcome: { result: unknown } | { error: StorageError }): void {
  const body =
    "result" in outcome
      ? `{"result":${stringifyWireJson(outcome.result)},"error":null,"id":${JSON.stringify(id ?? null)}}`
      : `{"result":null,"error":${stringifyWireJson(outcome.error.toWire())},"id":${JSON.stringify(id ?? null)}}`;
  send(response, 200, "application/json", body);
}
