// What the /import and /export family share (compat-notes §3): arguments from the query string or cookies;
// the caller known by `session_id` or HTTP Basic (401 with a realm when neither is good); the work run in the
// caller's task (`task_id`) or a new one, whose ref goes out in a `task-id` header before any body; refusals
// answered with a status and the same reason set on the task.
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import type { Session } from "../sessions.ts";
import type { TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { endAnswer } from "../http.ts";
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
    const session = await ts.sessions.login(user, colon < 0 ? "" : decoded.slice(colon + 1), "HTTP Basic");
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
