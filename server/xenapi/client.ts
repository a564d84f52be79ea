// A small XenAPI client over JSON-RPC 2.0 (POST /jsonrpc with fetch), for the CLI and the console: log in, call with the
// session, wait for a task through event.from, log out. A XenAPI failure is the core's XenApiError (code
// and params as the service sent them); anything else (unreachable, not JSON-RPC) a plain Error.
import { z } from "zod";
import { XenApiError } from "./errors.ts";
import type { XenValue } from "./values.ts";
import { parseXmlRpcValue } from "./xml-rpc.ts";

const zReply = z.object({
  result: z.unknown().optional(),
  error: z.object({ code: z.number(), message: z.string(), data: z.array(z.unknown()).optional() }).nullish(),
});

/** int64 fields: numbers over JSON-RPC, strings in xapi's XML-RPC habit; either is read. */
export const zInt64 = z.union([z.number(), z.string().regex(/^-?\d+$/).transform(Number)]);

const TASK_STATES = ["pending", "success", "failure", "cancelling", "cancelled"] as const;

export const zTaskRecord = z.looseObject({
  uuid: z.string(),
  name_label: z.string(),
  name_description: z.string(),
  status: z.enum(TASK_STATES),
  progress: z.number(),
  created: z.string(),
  finished: z.string(),
  result: z.string(),
  error_info: z.array(z.string()),
});
export type TaskRecord = z.infer<typeof zTaskRecord>;

const zEventBatch = z.object({
  events: z.array(z.object({ class: z.string(), operation: z.string(), ref: z.string(), snapshot: z.unknown().optional() })),
  token: z.string(),
});

/** How long one event.from waits before it is asked again (the service caps it at 60 s). */
const EVENT_WAIT_S = 30;

export function isFinished(task: TaskRecord): boolean {
  return task.status !== "pending" && task.status !== "cancelling";
}

/** A successful task's result (XML-RPC encoded by the service), decoded; undefined for none. */
export function taskResult(task: TaskRecord): XenValue | undefined {
  return task.result === "" ? undefined : parseXmlRpcValue(task.result);
}

/** One call at `url` (the service's base URL); answers the result or throws the failure. */
export async function jsonRpcCall(url: string, method: string, params: readonly unknown[], headers: Record<string, string> = {}): Promise<unknown> {
  const endpoint = new URL("jsonrpc", url.endsWith("/") ? url : `${url}/`);
  let response: Response;
  try {
    response = await fetch(endpoint, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 }) });
  } catch (error) {
    const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
    throw new Error(`cannot reach the toolstack at ${url}: ${cause}`);
  }
  const text = await response.text();
  if (!response.ok) throw new Error(`${endpoint}: HTTP ${response.status}: ${text.trim()}`);
  let reply: z.infer<typeof zReply>;
  try {
    reply = zReply.parse(JSON.parse(text));
  } catch {
    throw new Error(`${endpoint} did not answer JSON-RPC: ${text.slice(0, 200)}`);
  }
  if (reply.error) {
    // JSON-RPC's own (negative) codes mean the request itself was refused.
    if (reply.error.code < 0) throw new Error(`${method}: ${reply.error.message}`);
    throw new XenApiError(reply.error.message, reply.error.data ?? []);
  }
  return reply.result;
}

export class XenApiClient {
  readonly url: string;
  readonly session: string;
  /** Sent with every call: a console's X-Forwarded-For, naming the browser it calls for. */
  readonly #headers: Record<string, string>;

  constructor(url: string, session: string, headers: Record<string, string> = {}) {
    this.url = url;
    this.session = session;
    this.#headers = headers;
  }

  static async login(url: string, user: string, password: string, originator = "hangar-cli", headers: Record<string, string> = {}): Promise<XenApiClient> {
    const session = await jsonRpcCall(url, "session.login_with_password", [user, password, "2.21", originator], headers);
    return new XenApiClient(url, z.string().parse(session), headers);
  }

  /** A call with the session first; `schema` checks (and types) the result. */
  async call<T>(schema: z.ZodType<T>, method: string, ...params: unknown[]): Promise<T> {
    return schema.parse(await jsonRpcCall(this.url, method, [this.session, ...params], this.#headers));
  }

  /** A map of ref → record (get_all_records), each record checked by `schema`. */
  records<T>(cls: string, schema: z.ZodType<T>): Promise<Record<string, T>> {
    return this.call(z.record(z.string(), schema), `${cls}.get_all_records`);
  }

  async logout(): Promise<void> {
    await jsonRpcCall(this.url, "session.logout", [this.session]).catch(() => undefined);
  }

  /**
   * Follows a task through event.from until it finishes; `onChange` sees each record on the way. A task
   * destroyed before it finished is an error.
   */
  async waitTask(ref: string, onChange: (task: TaskRecord) => void = () => undefined): Promise<TaskRecord> {
    const classes = [`task/${ref}`];
    let batch = await this.call(zEventBatch, "event.from", classes, "", 0);
    // An empty snapshot: no such task (HANDLE_INVALID), or it appeared just now.
    let task = latest(batch, ref) ?? (await this.call(zTaskRecord, "task.get_record", ref));
    for (;;) {
      onChange(task);
      if (isFinished(task)) return task;
      batch = await this.call(zEventBatch, "event.from", classes, batch.token, EVENT_WAIT_S);
      task = latest(batch, ref) ?? task;
    }
  }
}

function latest(batch: z.infer<typeof zEventBatch>, ref: string): TaskRecord | undefined {
  const event = batch.events.findLast((e) => e.ref === ref);
  if (event === undefined) return undefined;
  if (event.operation === "del") throw new Error(`task ${ref} was destroyed before it finished`);
  return zTaskRecord.parse(event.snapshot);
}
