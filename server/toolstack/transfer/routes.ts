// The HTTP side of VM and disk import and export (vm-import-export.md, compat-notes §2–3): /export,
// /export_metadata, /import, /import_metadata, /import_raw_vdi, /export_raw_vdi. Arguments are checked before any
// body moves; a refusal is a status with its reason (and the caller's task failed with it). Past that the response
// starts at once with `task-id`, and the outcome goes through the task.
import { mkdir, rm } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";
import { z } from "zod";
import type { Compression } from "../../xva/compression.ts";
import { bodyIdleTimeoutMs } from "../../config.ts";
import { defaultSr } from "../calls/pool.ts";
import { expectsContinue, readAway } from "../http.ts";
import type { StoredObject } from "../objects.ts";
import type { TaskControl } from "../tasks.ts";
import { attachedSr } from "../srs.ts";
import { vdiByUuid } from "../calls/vdi.ts";
import { findVdiLocation, type LocatedVdi, locateVdi, vdiRecord } from "../vdi-records.ts";
import type { Feature, Toolstack } from "../toolstack.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import { etagDate, type ExportEtagKind } from "../../xenapi/export-etag.ts";
import { NULL_REF, parseXenDate } from "../../xenapi/values.ts";
import { exportDisposition, exportVm, prepareExport } from "./export.ts";
import { exportOva, ovaDisposition, prepareOvaExport } from "./ova-export.ts";
import { checked, elsewhere, parseArguments, redirect, refuse, requestBody, resource, runInTask, taskFor, zFlag } from "./http-resource.ts";
import { DISK_EXPORT_FORMATS, DISK_EXPORT_TYPES, type DiskExportFormat, diskExportDisposition, type ExportedVdi, exportDisk, prepareDiskExport } from "./disk-export.ts";
import { DISK_IMPORT_FORMATS, type DiskImportFormat, type DiskImportOptions, importDisk } from "./disk-import.ts";
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
  /** Hangar's: `ova` exports the VM as an OVA (OVF 1.0, streamOptimized VMDKs, a SHA-256 manifest) instead of an XVA. */
  format: z.enum(["xva", "ova"]).default("xva"),
  /** Hangar's resume: the bytes from `offset` of the export that `etag` names (412 when the VM changed since). */
  offset: z.coerce.number().int().nonnegative().optional(),
  etag: z.string().optional(),
});

const ZImportQuery = z.object({ sr_id: zRefArg.optional(), force: zFlag, restore: zFlag });
const ZImportMetadataQuery = z.object({ force: zFlag, restore: zFlag, dry_run: zFlag });

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
    const changed = "the VM changed since that export began: export it again from the start";
    if (query.format === "ova" && !metadataOnly) {
      const ova = await preparedFor(query, "ho1", (date) => prepareOvaExport(ts, vm, date), changed);
      const task = await taskFor(ts, args, `Export of VM as OVA: ${String(vm.record.name_label)}`);
      return sendInTask(ts, request, response, task, { "content-type": "application/octet-stream", "content-disposition": ovaDisposition(ova), etag: ova.etag, offset: query.offset }, (control) =>
        exportOva(ts, control, ova, response, query.offset ?? 0),
      );
    }
    const options = { compression: query.use_compression, checksum: query.checksum, metadataOnly };
    const prepared = await preparedFor(query, "hx1", (date) => prepareExport(ts, vm, options, date), changed);
    const task = await taskFor(ts, args, `Export of VM: ${String(vm.record.name_label)}`);
    await sendInTask(ts, request, response, task, { "content-type": "application/octet-stream", "content-disposition": exportDisposition(String(vm.record.name_label)), etag: prepared.etag, offset: query.offset }, (control) =>
      exportVm(ts, control, prepared, response, query.offset ?? 0),
    );
  });
}

/**
 * The export a request asks for: a fresh one, or with `offset` the one its `etag` names, made again from the date
 * the ETag carries and refused `412` (saying `changed`) unless it is the same export.
 */
async function preparedFor<P extends { etag: string }>(query: { offset?: number; etag?: string }, kind: ExportEtagKind, prepare: (date?: Date) => P | Promise<P>, changed: string): Promise<P> {
  if (query.offset === undefined) return prepare();
  const date = query.etag === undefined ? undefined : etagDate(query.etag, kind);
  if (date === undefined) throw refuse(400, new XenApiError("INVALID_VALUE", ["etag", `${query.etag ?? "(none)"} (offset needs the etag of the export being resumed)`]));
  const prepared = await prepare(date);
  if (prepared.etag !== query.etag) throw refuse(412, new XenApiError("INVALID_VALUE", ["etag", changed]));
  return prepared;
}

/**
 * An export's answer: 200 with `task-id` and its headers at once, then `work` streams into the response in the
 * task; HEAD answers the headers alone. A client that goes away, or takes no byte for HANGAR_BODY_IDLE_TIMEOUT
 * (a host that died sends no reset), cancels the export, which releases its datapaths.
 */
async function sendInTask(
  ts: Toolstack,
  request: IncomingMessage,
  response: ServerResponse,
  task: string,
  headers: { "content-type": string; "content-disposition": string; etag: string; offset: number | undefined },
  work: (control: TaskControl) => Promise<void>,
): Promise<void> {
  const { offset, ...rest } = headers;
  response.writeHead(200, { "task-id": task, ...rest, "cache-control": "no-store", ...(offset === undefined ? {} : { "x-hangar-offset": String(offset) }) });
  if (request.method === "HEAD") {
    response.end();
    await ts.tasks.succeed(task, "");
    return;
  }
  response.flushHeaders();
  const gone = () => {
    if (!response.writableFinished) void ts.tasks.cancel(task).catch(() => undefined);
  };
  response.once("close", gone);
  response.setTimeout(bodyIdleTimeoutMs(), () => response.destroy());
  const succeeded = await runInTask(ts, task, async (control) => {
    await work(control);
    return undefined;
  });
  response.off("close", gone);
  if (!succeeded) response.destroy();
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
    await receive(ts, request, response, args, metadataOnly ? "VM metadata import" : "VM import", work);
  });
}

/**
 * An upload's answer once its arguments are checked: 200 with `task-id` before any body is read, then `work` in
 * the task. Xen Orchestra's redirect probe, a PUT without a task that is empty or claims its 1 PiB stand-in
 * length (it hangs up once answered), is answered 200 with nothing made: an import started for it would hold a
 * VDI the real upload, right behind it, then finds busy.
 */
async function receive(ts: Toolstack, request: IncomingMessage, response: ServerResponse, args: Map<string, string>, label: string, work: Parameters<typeof runInTask>[2]): Promise<void> {
  const length = request.headers["content-length"];
  if (args.get("task_id") === undefined && Number(length) >= UNKNOWN_LENGTH) {
    response.writeHead(200, { "content-length": 0, connection: "close" });
    response.end();
    return;
  }
  if (length === "0" || (length === undefined && request.headers["transfer-encoding"] === undefined)) {
    if (args.get("task_id") === undefined) {
      response.writeHead(200, { "content-length": 0 });
      response.end();
      return;
    }
    throw refuse(400, new XenApiError("IMPORT_ERROR", ["the request has no body: send the file"]));
  }
  const task = await taskFor(ts, args, label);
  if (expectsContinue(request)) response.writeContinue();
  response.writeHead(200, { "task-id": task, "content-type": "application/octet-stream", "cache-control": "no-cache, no-store" });
  response.flushHeaders();
  const succeeded = await runInTask(ts, task, work);
  // A failed import leaves a client still sending: drain it first (for a while), so that it reads the
  // answer rather than a reset.
  if (!succeeded && !request.complete) await readAway(request);
  response.end();
}

const ZDiskImportQuery = z.object({
  vdi: z.string().min(1).optional(),
  sr_id: zRefArg.optional(),
  sr_uuid: z.string().min(1).optional(),
  format: z.string().default("raw").transform((v) => v.toLowerCase()),
  /** Presence alone asks for the framing, as in xapi. */
  chunked: z.string().optional().transform((v) => v !== undefined),
});

/** Where disk imports keep aside what arrives before the table that places it. */
const spillDir = (ts: Toolstack) => join(ts.dataDir, "spill");

/** Xen Orchestra's Content-Length for a stream of unknown length (1 PiB): the body ends when the client closes. */
const UNKNOWN_LENGTH = 2 ** 50;

/** The body's length from Content-Length, unless absent or Xen Orchestra's stand-in for "unknown". */
function bodyLength(request: IncomingMessage): number | undefined {
  const length = Number(request.headers["content-length"]);
  return Number.isSafeInteger(length) && length < UNKNOWN_LENGTH ? length : undefined;
}

/** A VDI named as xapi takes it: a ref, else a uuid. */
async function namedVdi(ts: Toolstack, name: string): Promise<LocatedVdi> {
  const ref = name.startsWith("OpaqueRef:") ? name : await checked(vdiByUuid(ts, name));
  return checked(locateVdi(ts, ref));
}

/** The VDI named by `vdi`, or the SR to make one on; refusals as xapi answers them. */
async function diskImportTarget(ts: Toolstack, query: z.output<typeof ZDiskImportQuery>, length: number | undefined): Promise<DiskImportOptions["target"]> {
  if (query.vdi !== undefined) return { vdi: await namedVdi(ts, query.vdi) };
  const srRef = query.sr_id ?? (query.sr_uuid === undefined ? undefined : (await checked(ts.objects.getByUuid("SR", query.sr_uuid))).ref);
  if (srRef === undefined) throw refuse(400, new XenApiError("VDI_MISSING", ["", "import_raw_vdi needs vdi=<ref or uuid> to write into, or sr_id or sr_uuid to make one on"]));
  await checked(ts.objects.get("SR", srRef));
  if (query.format === "raw" && (query.chunked || length === undefined)) throw refuse(400, new XenApiError("VDI_MISSING", ["", "Not enough info supplied to import: a raw body makes a new VDI only with its Content-Length, and never chunked; name the VDI with vdi="]));
  if (query.format === "tar") throw refuse(400, new XenApiError("VDI_MISSING", ["", "Not enough info supplied to import: a tar does not say its disk's size; name the VDI to write into with vdi="]));
  return { sr: await checked(attachedSr(ts, srRef)) };
}

const serveDiskImport = resource(["PUT", "POST"], async (ts, request, response, url, args) => {
  const query = parseArguments(ZDiskImportQuery, args);
  if (!(DISK_IMPORT_FORMATS as readonly string[]).includes(query.format)) throw refuse(404, new XenApiError("INTERNAL_ERROR", [`Unknown format ${query.format}: /import_raw_vdi reads ${DISK_IMPORT_FORMATS.join(", ")}`]));
  const format = query.format as DiskImportFormat;
  if (query.chunked && format !== "raw") throw refuse(404, new XenApiError("INTERNAL_ERROR", [`Cannot handle chunked ${format}: chunked framing carries raw data only`]));
  const length = bodyLength(request);
  const target = await diskImportTarget(ts, query, length);
  const srRef = "vdi" in target ? target.vdi.sr.ref : target.sr.ref;
  const host = await elsewhere(ts, [srRef]);
  if (host !== undefined) return redirect(request, response, url, host);
  await receive(ts, request, response, args, "VDI import", (control) => importDisk(ts, control, requestBody(request, control.signal), { format, chunked: query.chunked, target, length, spillDir: spillDir(ts) }));
});

const ZDiskExportQuery = z.object({
  vdi: z.string({ error: "an export needs vdi=<ref or uuid>" }).min(1, "an export needs vdi=<ref or uuid>"),
  format: z.string().default("raw").transform((v) => v.toLowerCase()),
  base: z.string().min(1).optional(),
  /** Hangar's resume, as for /export: the bytes from `offset` of the export `etag` names. */
  offset: z.coerce.number().int().nonnegative().optional(),
  etag: z.string().optional(),
});

/** What an export says of a VDI. */
async function exportedVdi(ts: Toolstack, vdi: LocatedVdi): Promise<ExportedVdi & { family: string }> {
  const record = await checked(vdiRecord(ts, vdi));
  const snapshotOf = String(record.snapshot_of);
  return {
    vdi,
    uuid: String(record.uuid),
    virtualSize: Number(record.virtual_size),
    snapshotTime: new Date(parseXenDate(String(record.snapshot_time)) ?? 0),
    // A VDI and its snapshots are one chain: the original names it.
    family: record.is_a_snapshot === true && snapshotOf !== NULL_REF ? snapshotOf : vdi.ref,
  };
}

const serveDiskExport = resource(["GET", "HEAD"], async (ts, request, response, url, args) => {
  const query = parseArguments(ZDiskExportQuery, args);
  if (!(DISK_EXPORT_FORMATS as readonly string[]).includes(query.format)) throw refuse(404, new XenApiError("INTERNAL_ERROR", [`Unknown format ${query.format}: /export_raw_vdi writes ${DISK_EXPORT_FORMATS.join(", ")}`]));
  const format = query.format as DiskExportFormat;
  const vdi = await namedVdi(ts, query.vdi);
  const base = query.base === undefined ? undefined : await namedVdi(ts, query.base);
  const host = await elsewhere(ts, [vdi.sr.ref]);
  if (host !== undefined) return redirect(request, response, url, host);
  const source = await exportedVdi(ts, vdi);
  const from = base === undefined ? undefined : await exportedVdi(ts, base);
  if (from !== undefined && (from.vdi.sr.ref !== vdi.sr.ref || from.family !== source.family)) {
    throw refuse(400, new XenApiError("VDI_INCOMPATIBLE_TYPE", [from.vdi.ref, `base ${from.uuid} is not of the chain of VDI ${source.uuid} (neither its snapshot, its original, nor a snapshot of the same VDI on its SR): a delta against it would not rebuild the disk`]));
  }
  const prepare = (date?: Date) => {
    try {
      return prepareDiskExport(source, from, format, date);
    } catch (error) {
      throw error instanceof XenApiError ? refuse(400, error) : error;
    }
  };
  const prepared = await preparedFor(query, "hd1", prepare, "that export was of another VDI, format or base: export again from the start");
  const task = await taskFor(ts, args, `Export of VDI: ${source.uuid}`);
  await sendInTask(ts, request, response, task, { "content-type": DISK_EXPORT_TYPES[format], "content-disposition": diskExportDisposition(prepared), etag: prepared.etag, offset: query.offset }, (control) =>
    exportDisk(ts, control, prepared, response, query.offset ?? 0),
  );
});

export const TRANSFER_FEATURE: Feature = {
  calls: [],
  routes: {
    "/export": serveExport(false),
    "/export_metadata": serveExport(true),
    "/import": serveImport(false),
    "/import_metadata": serveImport(true),
    "/import_raw_vdi": serveDiskImport,
    "/export_raw_vdi": serveDiskExport,
  },
  start: async (ts) => {
    // Spill files of imports a killed run left: their tasks fail below, as interrupted.
    await rm(spillDir(ts), { recursive: true, force: true });
    await mkdir(spillDir(ts), { recursive: true });
    ts.tasks.registerRecovery(TRANSFER_TASK_KIND, (ref, record) => recoverTransfer(ts, ref, record));
  },
};
