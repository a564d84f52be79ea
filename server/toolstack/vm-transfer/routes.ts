// The HTTP side of VM import and export (vm-import-export.md, compat-notes §2–3): /export, /export_metadata,
// /import, /import_metadata. Arguments are checked before any body moves; a refusal is a status with its
// reason (and the caller's task failed with it). Past that the response starts at once with `task-id`, and
// the outcome goes through the task.
import type { IncomingMessage, ServerResponse } from "node:http";
import { PassThrough, type Readable } from "node:stream";
import { z } from "zod";
import type { Compression } from "../../xva/compression.ts";
import { bodyIdleTimeoutMs } from "../../config.ts";
import { defaultSr } from "../calls/pool.ts";
import { hostErrors } from "../hosts.ts";
import { hostUrl } from "../../xenapi/hosts.ts";
import { endAnswer, expectsContinue, readAway, type Route } from "../http.ts";
import type { StoredObject } from "../objects.ts";
import type { TaskControl } from "../tasks.ts";
import { attachedSr } from "../srs.ts";
import { findVdiLocation } from "../vdi-records.ts";
import type { Feature, Toolstack } from "../toolstack.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { toXenApiError } from "../xenapi-errors.ts";
import { etagDate, exportDisposition, exportVm, type PreparedExport, prepareExport } from "./export.ts";
import {
  answerRefusal,
  argumentsOf,
  authenticate,
  type Caller,
  callerTask,
  parseArguments,
  refuse,
  ResourceRefusal,
  runInTask,
  statusOf,
  zFlag,
} from "./http-resource.ts";
import { importMetadata, importVm } from "./import.ts";
import { recoverTransfer, TRANSFER_TASK_KIND } from "./transfer-state.ts";

const zRefArg = z.string().regex(/^OpaqueRef:/, "expected an OpaqueRef");

const ZExportQuery = z.object({
  ref: zRefArg.optional(),
  uuid: z.string().min(1).optional(),
  use_compression: z
    .enum(["true", "false", "gzip", "zstd", ""])
    .optional()
    .transform((v): Compression | null => (v === "true" || v === "gzip" ? "gzip" : v === "zstd" ? "zstd" : null)),
  checksum: z.enum(["xxhash", "sha1", "none"]).default("xxhash").transform((v) => (v === "none" ? null : v)),
  /** Hangar's resume: the bytes from `offset` of the export that `etag` names (412 when the VM changed since). */
  offset: z.coerce.number().int().nonnegative().optional(),
  etag: z.string().optional(),
});

const ZImportQuery = z.object({ sr_id: zRefArg.optional(), force: zFlag, restore: zFlag });
const ZImportMetadataQuery = z.object({ force: zFlag, restore: zFlag, dry_run: zFlag });

/** Turns a XenAPI error met while checking arguments into a refusal with its status. */
async function checked<T>(work: Promise<T>): Promise<T> {
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
async function elsewhere(ts: Toolstack, srRefs: readonly string[]): Promise<StoredObject | undefined> {
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
function redirect(request: IncomingMessage, response: ServerResponse, url: URL, host: StoredObject): void {
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
function requestBody(request: IncomingMessage, signal: AbortSignal): Readable {
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
function resource(methods: readonly string[], serve: (ts: Toolstack, request: IncomingMessage, response: ServerResponse, url: URL, args: Map<string, string>) => Promise<void>): Route {
  return async (ts, request, response, url) => {
    const args = argumentsOf(request, url);
    const taskRef = args.get("task_id");
    let caller: Caller | undefined;
    try {
      if (!methods.includes(request.method ?? "")) {
        const body = `${url.pathname} takes ${methods.join(" or ")}\n`;
        response.writeHead(405, { allow: methods.join(", "), "content-type": "text/plain", "content-length": Buffer.byteLength(body), connection: "close" });
        endAnswer(response, body);
        return;
      }
      caller = await authenticate(ts, request, args);
      if (taskRef !== undefined) await checked(callerTask(ts, taskRef));
      await serve(ts, request, response, url, args);
    } catch (error) {
      if (!(error instanceof ResourceRefusal)) throw error;
      await answerRefusal(ts, response, error, taskRef);
    } finally {
      await caller?.release().catch(() => undefined);
    }
  };
}

/** The task to run in: the caller's, or a new one. */
async function taskFor(ts: Toolstack, args: Map<string, string>, label: string): Promise<string> {
  return args.get("task_id") ?? ts.tasks.create({ name_label: label });
}

async function findVm(ts: Toolstack, query: z.output<typeof ZExportQuery>): Promise<StoredObject> {
  if (query.ref !== undefined) return checked(ts.objects.get("VM", query.ref));
  if (query.uuid !== undefined) return checked(ts.objects.getByUuid("VM", query.uuid));
  throw refuse(400, new XenApiError("INVALID_VALUE", ["ref", "(an export needs ref or uuid)"]));
}

function serveExport(metadataOnly: boolean) {
  return resource(["GET", "HEAD"], async (ts, request, response, url, args) => {
    const query = parseArguments(ZExportQuery, args);
    const vm = await findVm(ts, query);
    const vbds = (await Promise.all((vm.record.VBDs as string[]).map((ref) => ts.objects.find("VBD", ref)))).filter((vbd) => vbd !== undefined);
    const srs = (await Promise.all(vbds.map((vbd) => findVdiLocation(ts, String(vbd.record.VDI))))).flatMap((location) => (location === undefined ? [] : [location.sr_ref]));
    const host = await elsewhere(ts, srs);
    if (host !== undefined) return redirect(request, response, url, host);
    const options = { compression: query.use_compression, checksum: query.checksum, metadataOnly };
    let prepared: PreparedExport;
    if (query.offset !== undefined) {
      const date = query.etag === undefined ? undefined : etagDate(query.etag);
      if (date === undefined) throw refuse(400, new XenApiError("INVALID_VALUE", ["etag", `${query.etag ?? "(none)"} (offset needs the etag of the export being resumed)`]));
      prepared = await prepareExport(ts, vm, options, date);
      if (prepared.etag !== query.etag) throw refuse(412, new XenApiError("INVALID_VALUE", ["etag", "the VM changed since that export began: export it again from the start"]));
    } else {
      prepared = await prepareExport(ts, vm, options);
    }
    const task = await taskFor(ts, args, `Export of VM: ${String(vm.record.name_label)}`);
    response.writeHead(200, {
      "task-id": task,
      "content-type": "application/octet-stream",
      "content-disposition": exportDisposition(String(vm.record.name_label)),
      "cache-control": "no-store",
      etag: prepared.etag,
      ...(query.offset === undefined ? {} : { "x-hangar-offset": String(query.offset) }),
    });
    if (request.method === "HEAD") {
      response.end();
      await ts.tasks.succeed(task, "");
      return;
    }
    response.flushHeaders();
    // A client that goes away cancels the export (and so releases its datapaths).
    const gone = () => {
      if (!response.writableFinished) void ts.tasks.cancel(task).catch(() => undefined);
    };
    response.once("close", gone);
    // So has one that takes no byte for HANGAR_BODY_IDLE_TIMEOUT: a host that died sends no reset, and its
    // export would hold the VM's datapaths for ever.
    response.setTimeout(bodyIdleTimeoutMs(), () => response.destroy());
    const succeeded = await runInTask(ts, task, async (control) => {
      await exportVm(ts, control, prepared, response, query.offset ?? 0);
      return undefined;
    });
    response.off("close", gone);
    if (!succeeded) response.destroy();
  });
}

function serveImport(metadataOnly: boolean) {
  return resource(["PUT", "POST"], async (ts, request, response, url, args) => {
    let work: Parameters<typeof runInTask>[2];
    const body = (control: TaskControl) => requestBody(request, control.signal);
    if (metadataOnly) {
      const query = parseArguments(ZImportMetadataQuery, args);
      const vdiMap = new Map<string, string>();
      for (const [key, value] of args) if (key.startsWith("vdi:")) vdiMap.set(key.slice(4), value);
      work = (control) => importMetadata(ts, control, body(control), { force: query.force, restore: query.restore, dryRun: query.dry_run, vdiMap: vdiMap });
    } else {
      const query = parseArguments(ZImportQuery, args);
      const srRef = query.sr_id ?? (await checked(defaultSr(ts)));
      await checked(ts.objects.get("SR", srRef));
      const host = await elsewhere(ts, [srRef]);
      if (host !== undefined) return redirect(request, response, url, host);
      const sr = await checked(attachedSr(ts, srRef));
      work = (control) => importVm(ts, control, body(control), { sr, force: query.force, restore: query.restore });
    }
    const length = request.headers["content-length"];
    if (length === "0" || (length === undefined && request.headers["transfer-encoding"] === undefined)) {
      // Xen Orchestra's redirect probe: an empty PUT without a task. Nothing to import, nothing made.
      if (args.get("task_id") === undefined) {
        response.writeHead(200, { "content-length": 0 });
        response.end();
        return;
      }
      throw refuse(400, new XenApiError("IMPORT_ERROR", ["the request has no body: send the archive"]));
    }
    const task = await taskFor(ts, args, metadataOnly ? "VM metadata import" : "VM import");
    if (expectsContinue(request)) response.writeContinue();
    response.writeHead(200, { "task-id": task, "content-type": "application/octet-stream" });
    response.flushHeaders();
    const succeeded = await runInTask(ts, task, work);
    // A failed import leaves a client still sending: drain it first (for a while), so that it reads the
    // answer rather than a reset.
    if (!succeeded && !request.complete) await readAway(request);
    response.end();
  });
}

export const VM_TRANSFER_FEATURE: Feature = {
  calls: [],
  routes: {
    "/export": serveExport(false),
    "/export_metadata": serveExport(true),
    "/import": serveImport(false),
    "/import_metadata": serveImport(true),
  },
  start: async (ts) => ts.tasks.registerRecovery(TRANSFER_TASK_KIND, (ref, record) => recoverTransfer(ts, ref, record)),
};
