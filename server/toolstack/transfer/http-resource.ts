// What the /import and /export family share (compat-notes §3): arguments from the query string or cookies;
// the caller known by `session_id` or HTTP Basic (401 with a realm when neither is good); the work run in the
// caller's task (`task_id`) or a new one, whose ref goes out in a `task-id` header before any body; refusals
// answered with a status and the same reason set on the task.
import type { IncomingMessage, ServerResponse } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import { z } from "zod";
import { bodyIdleTimeoutMs } from "../../config.ts";
import { hostUrl } from "../../xenapi/hosts.ts";
import { hostErrors } from "../hosts.ts";
import { clientAddress, endAnswer, type Route } from "../http.ts";
import { logIn } from "../rbac/login.ts";
import type { AuditEntry } from "../rbac/audit.ts";
import { auditArgs } from "../rbac/audit-args.ts";
import { authorize } from "../rbac/authorize.ts";
import { httpAction } from "../rbac/http-actions.ts";
import type { StoredObject } from "../objects.ts";
import type { Session } from "../sessions.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { XenApiError, xenErrors } from "../../xenapi/errors.ts";
import { toXenApiError } from "../xenapi-errors.ts";
import type { XenValue } from "../../xenapi/values.ts";

export const REALM = "xapi";

/** A refusal before the work starts: the HTTP status to answer, and the reason (also the task's error). */
export class ResourceRefusal extends Error {
  readonly status: number;
  readonly error: XenApiError;
  constructor(status: number, error: XenApiError) {
    super(error.message);
    this.status = status;
    this.error = error;
  }
}

export const refuse = (status: number, error: XenApiError) => new ResourceRefusal(status, error);

/** The status a XenAPI error found while checking arguments answers with. */
export function statusOf(error: XenApiError): number {
  if (error.code === "SESSION_INVALID" || error.code === "SESSION_AUTHENTICATION_FAILED") return 401;
  if (error.code === "PERMISSION_DENIED") return 403;
  if (error.code === "HANDLE_INVALID" || error.code === "UUID_INVALID") return 404;
  return 400;
}

export const zFlag = z
  .enum(["true", "false", "1", "0", "yes", "no", ""])
  .optional()
  .transform((v) => v === "true" || v === "1" || v === "yes" || v === "");

/** Query arguments, with cookies as a fallback (xapi reads both). */
export function argumentsOf(request: IncomingMessage, url: URL): Map<string, string> {
  const args = new Map<string, string>();
  for (const part of String(request.headers.cookie ?? "").split(";")) {
    const at = part.indexOf("=");
    if (at > 0) args.set(part.slice(0, at).trim(), decodeURIComponent(part.slice(at + 1).trim()));
  }
  for (const [key, value] of url.searchParams) args.set(key, value);
  return args;
}

/** Parses the arguments with `schema`; a bad one is a 400 naming it. */
export function parseArguments<S extends z.ZodType>(schema: S, args: Map<string, string>): z.output<S> {
  const parsed = schema.safeParse(Object.fromEntries(args));
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.join(".");
  throw refuse(400, xenErrors.invalidValue(field, `${String(args.get(field) ?? "")} (${issue.message})`));
}

export interface Caller {
  session: Session;
  /** Ends a session made from Basic credentials for this request. */
  release(): Promise<void>;
}

/** The caller: `session_id`, else HTTP Basic credentials; else 401. */
export async function authenticate(ts: Toolstack, request: IncomingMessage, args: Map<string, string>): Promise<Caller> {
  const sessionId = args.get("session_id");
  if (sessionId !== undefined) {
    try {
      return { session: await ts.sessions.check(sessionId), release: async () => {} };
    } catch (error) {
      throw refuse(401, toXenApiError(error));
    }
  }
  const basic = /^Basic\s+(\S+)$/i.exec(String(request.headers.authorization ?? ""));
  if (basic === null) throw refuse(401, xenErrors.sessionInvalid("(no session_id and no Basic credentials)"));
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const user = colon < 0 ? decoded : decoded.slice(0, colon);
  try {
    const session = await logIn(ts, user, colon < 0 ? "" : decoded.slice(colon + 1), "HTTP Basic", clientAddress(request));
    return { session, release: () => ts.sessions.logout(session.ref) };
  } catch (error) {
    throw refuse(401, toXenApiError(error));
  }
}

/** The caller's task (pending and not yet running), or HANDLE_INVALID / OPERATION_NOT_ALLOWED as a 400. */
export async function callerTask(ts: Toolstack, ref: string): Promise<string> {
  const task = await ts.objects.find("task", ref);
  if (task === undefined) throw refuse(404, xenErrors.handleInvalid("task", ref));
  if (task.record.status !== "pending" || ts.tasks.isRunning(ref)) throw refuse(400, xenErrors.operationNotAllowed(`task ${ref} is ${String(task.record.status)}${ts.tasks.isRunning(ref) ? " and already running" : ""}`));
  return ref;
}

/** Answers a refusal: status, reason as text (401 with the realm); the caller's task, if any, fails with it. */
export async function answerRefusal(ts: Toolstack, response: ServerResponse, refusal: ResourceRefusal, taskRef: string | undefined): Promise<void> {
  if (taskRef !== undefined) {
    const task = await ts.objects.find("task", taskRef);
    if (task !== undefined && task.record.status === "pending" && !ts.tasks.isRunning(taskRef)) await ts.tasks.fail(taskRef, refusal.error);
  }
  if (response.headersSent) {
    response.destroy();
    return;
  }
  const body = `${refusal.error.description.join(" ")}\n`;
  const headers: Record<string, string | number> = { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(body), connection: "close" };
  if (refusal.status === 401) headers["www-authenticate"] = `Basic realm="${REALM}"`;
  response.writeHead(refusal.status, headers);
  endAnswer(response, body);
}

/** Runs `work` as the task `ref` (already made); answers whether it succeeded, once the task's outcome is recorded. */
export async function runInTask(ts: Toolstack, ref: string, work: (control: TaskControl) => Promise<XenValue | undefined>): Promise<boolean> {
  let succeeded = true;
  // The transfer's bytes come through this process's connection: stopping the service stops it.
  await ts.tasks.run(
    ref,
    async (control) => {
      try {
        return await work(control);
      } catch (error) {
        succeeded = false;
        throw error;
      }
    },
    { boundToProcess: true },
  );
  return succeeded;
}

/** Turns a XenAPI error met while checking arguments into a refusal with its status. */
export async function checked<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof ResourceRefusal) throw error;
    const xen = toXenApiError(error);
    throw refuse(statusOf(xen), xen);
  }
}

/**
 * The host to send a request to when this one cannot reach the SRs' data (another host of the pool attaches
 * them), or undefined when this host can serve it. A dead host is refused in words (503, HOST_OFFLINE).
 */
export async function elsewhere(ts: Toolstack, srRefs: readonly string[]): Promise<StoredObject | undefined> {
  const attached = (await ts.objects.all("PBD")).filter((pbd) => pbd.record.currently_attached === true);
  for (const sr of new Set(srRefs)) {
    const pbds = attached.filter((pbd) => pbd.record.SR === sr);
    if (pbds.some((pbd) => pbd.record.host === ts.host.ref)) continue;
    const pbd = pbds[0];
    const host = pbd === undefined ? undefined : await ts.objects.find("host", String(pbd.record.host));
    if (host === undefined) continue;
    if (!(await ts.pool.isLive(host.ref))) throw refuse(503, hostErrors.hostOffline(host));
    return host;
  }
  return undefined;
}

/** 302 to the same path and query on another host (compat-notes §3), on the port that host serves that scheme on. */
export function redirect(request: IncomingMessage, response: ServerResponse, url: URL, host: StoredObject): void {
  const location = `${hostUrl(host.record, "encrypted" in request.socket ? "https" : "http")}${url.pathname}${url.search}`;
  response.writeHead(302, { location, "content-length": 0 });
  response.end();
}

/**
 * The request body as a stream that ends, rather than fails, when the client closes after its data: Xen
 * Orchestra's client sends a 1 PiB Content-Length and closes after the archive, so the archive's end is the
 * import's; an archive really cut short is found by the reader. Destroying the stream leaves the request to be
 * drained, so a client still sending gets its answer rather than a reset.
 *
 * The stream fails, so that the reader waiting on it stops, when the task is cancelled and when no byte came
 * for HANGAR_BODY_IDLE_TIMEOUT while the reader waited for one (time the import spent writing, with the
 * request paused by backpressure, is not the client's).
 */
export function requestBody(request: IncomingMessage, signal: AbortSignal): Readable {
  const body = new PassThrough();
  // Its reader may come after it failed (a client gone before the body was attached): the reader finds the
  // failure on the stream, which must not be thrown as unhandled meanwhile.
  body.on("error", () => undefined);
  request.pipe(body);
  request.on("error", () => undefined);
  request.once("close", () => {
    if (!body.writableEnded) body.end();
  });
  const idleMs = bodyIdleTimeoutMs();
  const idle = setTimeout(function stalled() {
    if (request.isPaused() || body.writableNeedDrain) return idle.refresh();
    body.destroy(new XenApiError("IMPORT_ERROR", [`the upload stalled: no byte arrived for ${idleMs / 1000} s (HANGAR_BODY_IDLE_TIMEOUT)`]));
  }, idleMs);
  const arrived = () => idle.refresh();
  const cancelled = () => body.destroy(signal.reason as Error);
  request.on("data", arrived);
  signal.addEventListener("abort", cancelled, { once: true });
  body.once("close", () => {
    clearTimeout(idle);
    request.off("data", arrived);
    signal.removeEventListener("abort", cancelled);
  });
  if (signal.aborted) cancelled();
  // Gone already (the client hung up, or its framing failed, while the route checked the caller): no close is
  // left to come.
  else if (request.destroyed && !request.complete) body.destroy(new XenApiError("IMPORT_ERROR", ["the client closed the connection before sending the archive"]));
  return body;
}

/** Shared frame: authentication, the task, refusals, and the caller's Basic session ended afterwards. */
export function resource(methods: readonly string[], serve: (ts: Toolstack, request: IncomingMessage, response: ServerResponse, url: URL, args: Map<string, string>) => Promise<void>): Route {
  return async (ts, request, response, url) => {
    const args = argumentsOf(request, url);
    const taskRef = args.get("task_id");
    let caller: Caller | undefined;
    let trail: Omit<AuditEntry, "decision"> | undefined;
    try {
      if (!methods.includes(request.method ?? "")) {
        const body = `${url.pathname} takes ${methods.join(" or ")}\n`;
        response.writeHead(405, { allow: methods.join(", "), "content-type": "text/plain", "content-length": Buffer.byteLength(body), connection: "close" });
        endAnswer(response, body);
        return;
      }
      caller = await authenticate(ts, request, args);
      const action = httpAction(request.method ?? "", url.pathname)!;
      trail = { session: caller.session, client: clientAddress(request), kind: "HTTP" as const, action: action.permission, args: await auditArgs(ts, action.permission, [...args.keys()], [...args.values()]) };
      try {
        authorize(caller.session, action.permission, action.role);
      } catch (error) {
        // A denial is recorded whatever the action: someone tried what their role does not allow.
        await ts.audit.record({ ...trail, decision: "DENIED" });
        trail = undefined;
        throw refuse(403, error as XenApiError);
      }
      if (!action.audited) trail = undefined;
      if (taskRef !== undefined) await checked(callerTask(ts, taskRef));
      await serve(ts, request, response, url, args);
      if (trail !== undefined) await ts.audit.record({ ...trail, decision: "ALLOWED" });
    } catch (error) {
      if (!(error instanceof ResourceRefusal)) throw error;
      if (trail !== undefined) await ts.audit.record({ ...trail, decision: "ALLOWED", error: error.error.code });
      await answerRefusal(ts, response, error, taskRef);
    } finally {
      await caller?.release().catch(() => undefined);
    }
  };
}

/** The task to run in: the caller's, or a new one. */
export async function taskFor(ts: Toolstack, args: Map<string, string>, label: string): Promise<string> {
  return args.get("task_id") ?? ts.tasks.create({ name_label: label });
}

