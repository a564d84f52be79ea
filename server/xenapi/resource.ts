// The toolstack's HTTP resources (/import, /export, /import_metadata, /export_metadata) as a client drives them,
// in the shape of Xen Orchestra's `getResource` / `putResource` (compat-notes §3): the session and task in the
// query; a pool member's redirect followed (up to 5, the method and body kept: a body is only sent to the URL
// that takes it, found with Xen Orchestra's empty-PUT probe); the body streamed with backpressure; the work's
// outcome read from its task, not from the HTTP answer.
import { type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders, request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { isFinished, type TaskRecord, taskResult, type XenApiClient, zTaskRecord } from "./client.ts";
import { XenApiError } from "./errors.ts";
import type { XenValue } from "./values.ts";

export const MAX_REDIRECTS = 5;
/** How long an empty PUT may wait for the toolstack's answer. */
const PROBE_TIMEOUT_MS = 30_000;
/** What of a refusal's body is kept: it is a reason, not data. */
const REASON_LIMIT = 4096;

export type ResourceQuery = Record<string, string | undefined>;

/** A refusal: the HTTP status, and the toolstack's reason (xapi's habit: "CODE param …"). */
export class ResourceRefused extends Error {
  readonly status: number;
  readonly reason: string;
  constructor(what: string, status: number, reason: string) {
    super(`${what} refused (HTTP ${status}): ${reason}`);
    this.name = "ResourceRefused";
    this.status = status;
    this.reason = reason;
  }
}

/** `path` on the toolstack at `base`, with the session and the query (undefined values left out). */
export function resourceUrl(base: string, session: string, path: string, query: ResourceQuery = {}): URL {
  const url = new URL(path.replace(/^\//, ""), base.endsWith("/") ? base : `${base}/`);
  url.searchParams.set("session_id", session);
  for (const [key, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(key, value);
  return url;
}

/** What `followRedirects` needs of an answer, whichever HTTP client read it. */
export interface Answer {
  status: number;
  location: string | null;
  /** Drops the answer (its body unread): a redirect's. */
  discard(): void;
}

const isRedirect = (answer: Answer) => answer.status >= 300 && answer.status < 400 && answer.location !== null;

/**
 * Sends `send(url)` again to each redirect's Location, at most `max` times: the caller's `send` keeps the
 * method and decides about the body. The last answer (a redirect too, past `max`) and the URL that gave it.
 */
export async function followRedirects<A extends Answer>(url: URL, send: (url: URL) => Promise<A>, max = MAX_REDIRECTS): Promise<{ url: URL; answer: A }> {
  for (let hop = 0; ; hop++) {
    const answer = await send(url);
    if (!isRedirect(answer) || hop === max) return { url, answer };
    answer.discard();
    url = new URL(answer.location!, url);
  }
}

function send(url: URL, method: string, headers: OutgoingHttpHeaders, signal?: AbortSignal): ClientRequest {
  return (url.protocol === "https:" ? httpsRequest : httpRequest)(url, { method, headers, signal });
}

interface NodeAnswer extends Answer {
  response: IncomingMessage;
}

function answerOf(request: ClientRequest): Promise<NodeAnswer> {
  return new Promise((resolve, reject) => {
    request.once("response", (response: IncomingMessage) =>
      resolve({ response, status: response.statusCode ?? 0, location: response.headers.location ?? null, discard: () => response.resume() }),
    );
    request.once("error", reject);
  });
}

/** A refusal's body in words (bounded). */
export async function reasonOf(response: IncomingMessage): Promise<string> {
  let text = "";
  for await (const chunk of response) if (text.length < REASON_LIMIT) text += String(chunk);
  return text.trim().slice(0, REASON_LIMIT) || response.statusMessage || "";
}

const unreachable = (url: URL, error: Error) => new Error(`the toolstack at ${url.origin} cannot be reached (${(error.cause as Error | undefined)?.message ?? error.message})`);

/** A GET, its redirects followed; the answer whatever its status (its body unread). */
export async function get(url: URL, options: { headers?: OutgoingHttpHeaders; signal?: AbortSignal } = {}): Promise<{ url: URL; response: IncomingMessage }> {
  const { url: final, answer } = await followRedirects(url, (at) => {
    const request = send(at, "GET", options.headers ?? {}, options.signal);
    request.end();
    return answerOf(request);
  });
  return { url: final, response: answer.response };
}

/**
 * Xen Orchestra's probe: an empty PUT without a task. The toolstack answers before reading any body, with a
 * redirect to the host that takes the upload (a pool member whose SR it is) or a refusal; the URL to send
 * the body to, or ResourceRefused.
 */
export async function probePut(url: URL, options: { signal?: AbortSignal; what?: string } = {}): Promise<URL> {
  const { signal, what = "the upload" } = options;
  const limit = signal === undefined ? AbortSignal.timeout(PROBE_TIMEOUT_MS) : AbortSignal.any([signal, AbortSignal.timeout(PROBE_TIMEOUT_MS)]);
  const { url: final, answer } = await followRedirects(url, (at) => {
    const request = send(at, "PUT", { "content-length": 0, "content-type": "application/octet-stream" }, limit);
    request.end();
    return answerOf(request).catch((error: Error) => {
      throw signal?.aborted ? (signal.reason as Error) : unreachable(at, error);
    });
  });
  if (answer.status >= 200 && answer.status < 300) {
    answer.discard();
    return final;
  }
  if (isRedirect(answer)) {
    answer.discard();
    throw new ResourceRefused(what, 508, `the toolstack redirected it more than ${MAX_REDIRECTS} times (last to ${new URL(answer.location!, final).origin})`);
  }
  throw new ResourceRefused(what, answer.status, await reasonOf(answer.response));
}

export interface PutOptions {
  /** The body's length, when known: sent as Content-Length. */
  length?: number;
  signal?: AbortSignal;
}

export interface PutResource {
  request: ClientRequest;
  /** The toolstack's answer: it comes once the work has ended (or at once, refusing it). */
  response: Promise<IncomingMessage>;
  /** How `write` ended: undefined, or the error reading or sending the body (the request is then destroyed). */
  sent: Promise<Error | undefined>;
}

/**
 * PUTs a body to `url`, one `probePut` answered (so that only the host that takes it is sent the bytes).
 * `write` streams the body into the request with backpressure (a `pipeline` into it, or writes waiting on
 * their callbacks) and ends it.
 */
export function putResource(url: URL, write: (request: ClientRequest) => Promise<void>, options: PutOptions = {}): PutResource {
  const headers: OutgoingHttpHeaders = { "content-type": "application/octet-stream" };
  if (options.length !== undefined) headers["content-length"] = options.length;
  const request = send(url, "PUT", headers, options.signal);
  const response = answerOf(request).then((answer) => answer.response);
  response.catch(() => undefined);
  const sent = write(request).then(
    () => undefined,
    (error: unknown) => {
      request.destroy(error as Error);
      return error as Error;
    },
  );
  return { request, response, sent };
}

const zProgress = z.union([z.number(), z.string().transform(Number)]);
/** The task a resource's work runs in: its progress, cancelling it, its end and outcome. */
export class ResourceTask {
  readonly ref: string;
  readonly #client: XenApiClient;

  constructor(client: XenApiClient, ref: string) {
    this.#client = client;
    this.ref = ref;
  }

  /** The task of a resource's answer (its `task-id` header). */
  static of(client: XenApiClient, response: IncomingMessage): ResourceTask {
    return new ResourceTask(client, z.string().parse(response.headers["task-id"]));
  }

  record(): Promise<TaskRecord> {
    return this.#client.call(zTaskRecord, "task.get_record", this.ref);
  }

  /** Asks the toolstack to cancel (it undoes the work before the task ends); a failure to ask is ignored. */
  async cancel(): Promise<void> {
    await this.#client.call(z.unknown(), "task.cancel", this.ref).catch(() => undefined);
  }

  /** Polls the progress (0–1) into `set` every `everyMs` until the returned stop is called. */
  followProgress(set: (fraction: number) => void, everyMs = 1000): () => void {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const poll = async () => {
      const fraction = await this.#client.call(zProgress, "task.get_progress", this.ref).catch(() => undefined);
      if (stopped) return;
      if (fraction !== undefined && Number.isFinite(fraction)) set(fraction);
      timer = setTimeout(() => void poll(), everyMs);
    };
    void poll();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }

  /**
   * The record once the task has finished, polled every `everyMs`; undefined if `signal` ends first. The
   * toolstack's failures to answer (a restart) are waited out, or with `failOnError` thrown.
   */
  async finished(signal: AbortSignal, options: { everyMs?: number; failOnError?: boolean } = {}): Promise<TaskRecord | undefined> {
    const { everyMs = 500, failOnError = false } = options;
    while (!signal.aborted) {
      const record = await this.record().catch((error: unknown) => {
        if (failOnError) throw error;
        return undefined;
      });
      if (record !== undefined && isFinished(record)) return record;
      await delay(everyMs, undefined, { signal }).catch(() => undefined);
    }
    return undefined;
  }

  /** The record once finished, followed with event.from (the outcome of work whose stream has ended). */
  done(): Promise<TaskRecord> {
    return this.#client.waitTask(this.ref);
  }
}

/** A finished task's result, or its failure as the XenAPI error it carries. */
export function outcomeOf(task: TaskRecord): XenValue | undefined {
  if (task.status === "success") return taskResult(task);
  const [code = task.status === "cancelled" ? "TASK_CANCELLED" : "INTERNAL_ERROR", ...params] = task.error_info;
  throw new XenApiError(code, params);
}
