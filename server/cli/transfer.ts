// VM and disk import and export from the command line (vm-import-export.md, compat-notes §2–3): archives and
// disk images stream between disk (or a URL, or stdin/stdout) and the toolstack's /import, /export,
// /import_raw_vdi and /export_raw_vdi, never held in memory; the outcome is the task's. An export goes to
// FILE.part with a sidecar (FILE.part.json) that lets --resume ask for the rest (offset + etag); Ctrl-C keeps
// both. Ctrl-C during an import cancels its task.
import { type FileHandle, open, readFile, rename, rm, stat, truncate } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { dirname } from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { formatSize } from "./progress.ts";
import { DEFAULT_URL, resolveRef, withClient } from "./connection.ts";
import { parseCommandLine, UsageError } from "./usage.ts";
import { importPackage, packageKind } from "./package-import.ts";
import { counter, endpoint, failure, interruptible, openSource, refused, settledStatus, sniffSource, type Source, TransferProgress } from "./transfer-io.ts";
import { type TaskRecord, taskResult, type XenApiClient } from "../xenapi/client.ts";
import { get, probePut, putResource, ResourceTask, type ResourceQuery } from "../xenapi/resource.ts";

/** Exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it. */
const INTERRUPTED = 130;

interface Command {
  summary: string;
  help: string;
  run(argv: string[]): Promise<number>;
}

// The connection as toolstack-commands.ts makes it (its helpers are private to it).
const CONNECTION_OPTIONS = { url: { type: "string" }, user: { type: "string" } } as const;

const CONNECTION_HELP = `Connection:
  --url URL    the toolstack (default: $HANGAR_URL or ${DEFAULT_URL})
  --user NAME  user to log in as (default root); the password is $HANGAR_PASSWORD, else asked on a terminal
`;





/**
 * PUTs an archive to `path` (/import or /import_metadata) and follows its task to the end. An empty PUT first
 * finds where to send it (the toolstack answers a redirect or refusal before anything is read), so the source
 * is opened only once the toolstack takes it. Answers the finished task; null when interrupted (task cancelled).
 */
async function putArchive(client: XenApiClient, path: string, query: ResourceQuery, given: string, opened?: Source): Promise<TaskRecord | null> {
  let target: URL;
  try {
    target = await probePut(endpoint(client, path, query), { what: "the import" });
  } catch (error) {
    opened?.stream.destroy();
    throw error;
  }
  const source = opened ?? (await openSource(given));
  let sourceError: Error | undefined;
  source.stream.once("error", (error) => (sourceError ??= error));
  const progress = new TransferProgress("sent", source.size);
  const put = putResource(target, (request) => pipeline(source.stream, counter((n) => (progress.bytes += n)), request), { length: source.size ?? undefined });
  return interruptible(async (signal) => {
    let task: ResourceTask | undefined;
    const stopUpload = () => {
      source.stream.destroy();
      put.request.destroy();
    };
    signal.addEventListener("abort", () => {
      // The task first: a cut upload alone would read as a truncated archive, not a cancel.
      void (task?.cancel() ?? Promise.resolve()).then(stopUpload);
    });
    let stopFollowing = () => {};
    try {
      // An upload that fails before the answer is the error; one that ends first just waits for it.
      const response = await Promise.race([put.response, put.sent.then((error) => (error === undefined ? new Promise<never>(() => {}) : Promise.reject(error)))]);
      if (response.statusCode !== 200) {
        stopUpload();
        throw await refused("the import", response);
      }
      task = ResourceTask.of(client, response);
      if (signal.aborted) await task.cancel();
      stopFollowing = task.followProgress((fraction) => (progress.task = fraction));
      // The response ends once the import has: its outcome is then the task's.
      const ended = new Promise<void>((resolve) => response.once("close", resolve));
      response.resume();
      await Promise.race([ended, new Promise((resolve) => signal.addEventListener("abort", resolve))]);
      await put.sent;
      stopFollowing();
      progress.stop(signal.aborted ? null : progress.bytes);
      if (signal.aborted) {
        const status = await settledStatus(task);
        process.stderr.write(`interrupted: the import's task ${status === undefined ? "was asked to cancel" : `ended ${status}`}\n`);
        return null;
      }
      const record = await task.done();
      if (record.status !== "success" && sourceError !== undefined) process.stderr.write(`reading ${given}: ${sourceError.message}\n`);
      return record;
    } catch (error) {
      stopFollowing();
      progress.stop(null);
      if (signal.aborted) {
        process.stderr.write("interrupted: the import was stopped before it began\n");
        return null;
      }
      if (sourceError !== undefined) throw new Error(`reading ${given}: ${sourceError.message}`, { cause: error });
      throw error;
    }
  });
}

/** The VMs a finished import made, as "uuid  name" lines on stdout. */
async function printVms(client: XenApiClient, task: TaskRecord): Promise<number> {
  const refs = z.array(z.string()).parse(taskResult(task) ?? []);
  for (const ref of refs) {
    const vm = await client.call(z.looseObject({ uuid: z.string(), name_label: z.string() }), "VM.get_record", ref);
    process.stdout.write(`${vm.uuid}  ${vm.name_label}\n`);
  }
  return 0;
}

/** Exit code of an import: 0 with the new VMs printed, 1 with the task's error, INTERRUPTED. */
async function importOutcome(client: XenApiClient, task: TaskRecord | null, done: (task: TaskRecord) => Promise<number>): Promise<number> {
  if (task === null) return INTERRUPTED;
  if (task.status === "success") return done(task);
  process.stderr.write(`import ${failure(task)}\n`);
  return 1;
}

const vmImport: Command = {
  summary: "import a VM from an XVA, an OVA, an OVF, a disk image, a legacy package directory or a URL",
  help: `Usage: hangar vm-import FILE|DIR|URL|- [--sr SR] [--force] [--restore]

Imports a VM. What FILE is, is read from its first bytes, whatever its name:
  - an XVA (plain, .gz or .zst) or a legacy package as a tar: sent to the toolstack's /import;
  - an OVA (VMware, VirtualBox, qemu/Proxmox; VMDK, qcow2, VHD, VHDX or raw disks inside): the VM its OVF
    describes, each disk converted as it arrives; its manifest's digests checked;
  - an OVF descriptor: the same, its disk files (and manifest) read from beside it;
  - a disk image (VMDK, qcow2, VHD, VHDX; raw when named .raw or .img): a new VM that boots it (1 vCPU, 1 GiB).
DIR is a legacy package directory (ova.xml and its disks' chunk directories); URL an http(s):// address whose
body is streamed through as it arrives; "-" reads stdin. On success prints the new VM's uuid and name (and,
on stderr, what the package asked that the VM does not have); on failure the error, and exits 1, nothing
left behind. Ctrl-C cancels the import (its task) and exits 130. Progress goes to stderr: a bar on a
terminal, otherwise a line per 10% or 10 s.

Options:
  --sr SR      the SR for the disks (uuid or name; default: the pool's default SR)
  --force      import even when block checksums or an OVA's manifest digests do not match
  --restore    (XVA) keep the exported VM's uuid and MACs, replacing a halted VM of that uuid

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, sr: { type: "string" }, force: { type: "boolean" }, restore: { type: "boolean" } });
    if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "needs FILE, DIR or URL" : `unexpected argument "${positionals[1]}"`);
    return withClient(values, async (client) => {
      const sr = values.sr === undefined ? undefined : await resolveRef(client, "SR", values.sr, true);
      const found = await packageKind(positionals[0]!);
      if (found !== undefined) {
        if (values.restore === true) throw new UsageError("--restore is for XVA archives: an OVA or a disk image has no VM identity to keep");
        return importPackage(client, positionals[0]!, found, { sr, force: values.force === true });
      }
      const task = await putArchive(client, "import", { sr_id: sr, force: values.force ? "true" : undefined, restore: values.restore ? "true" : undefined }, positionals[0]!);
      return importOutcome(client, task, (done) => printVms(client, done));
    });
  },
};

const MAP_VDI = /^([^=]+)=([^=]+)$/;

const vmImportMetadata: Command = {
  summary: "import a VM's metadata (from vm-export-metadata), linking existing disks",
  help: `Usage: hangar vm-import-metadata FILE|- [--restore] [--force] [--dry-run] [--map-vdi SRC=DST ...]

Imports the VM described by FILE (a metadata export): its disks are the VDIs already here with the uuids
the file names, or those --map-vdi gives. Prints the new VM's uuid and name; exits 1 with the task's
error when it fails.

Options:
  --restore          keep the VM's uuid and MACs, replacing a halted VM of that uuid
  --force            import even if something does not match
  --dry-run          check only: nothing is made
  --map-vdi SRC=DST  the disk with uuid SRC in the file is the VDI with uuid DST here (repeatable)

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, {
      ...CONNECTION_OPTIONS,
      restore: { type: "boolean" },
      force: { type: "boolean" },
      "dry-run": { type: "boolean" },
      "map-vdi": { type: "string", multiple: true },
    });
    if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "needs FILE" : `unexpected argument "${positionals[1]}"`);
    const query: Record<string, string | undefined> = { restore: values.restore ? "true" : undefined, force: values.force ? "true" : undefined, dry_run: values["dry-run"] ? "true" : undefined };
    for (const mapping of values["map-vdi"] ?? []) {
      const match = MAP_VDI.exec(mapping);
      if (match === null) throw new UsageError(`--map-vdi takes SRC=DST (two VDI uuids), not "${mapping}"`);
      query[`vdi:${match[1]}`] = match[2];
    }
    return withClient(values, async (client) => {
      const task = await putArchive(client, "import_metadata", query, positionals[0]!);
      return importOutcome(client, task, async (done) => {
        if (!values["dry-run"]) return printVms(client, done);
        process.stderr.write("dry run: the metadata imports cleanly (nothing was made)\n");
        return 0;
      });
    });
  },
};

// ---- Disk import

const DISK_IMPORT_FORMATS = ["raw", "vhd", "qcow2", "vmdk", "vhdx", "tar"] as const;

const vdiImport: Command = {
  summary: "import a disk image (raw, VHD, qcow2, VMDK, VHDX, tar) into a VDI or a new one",
  help: `Usage: hangar vdi-import FILE|URL|- (--vdi VDI | --sr SR) [--format FORMAT]

Writes a disk image into VDI (what the image leaves out reads as zeros there), or into a new VDI on SR of the
size the image states ("Imported VDI"). FORMAT is raw, vhd, qcow2, vmdk, vhdx or tar (xapi's one-disk tar);
without --format it is read from the image's first bytes (a fixed VHD from its last sector), raw when none
names a format. VHD, qcow2 and VMDK are written as they arrive; a VHDX is kept aside by the toolstack and
converted once complete. On success prints the VDI's uuid and name; on failure the task's error, and exits 1.
Ctrl-C cancels the import and exits 130. Progress goes to stderr.

Options:
  --vdi VDI        the VDI to write into (uuid, name or OpaqueRef)
  --sr SR          the SR to make a new VDI on (uuid or name)
  --format FORMAT  the image's format (default: read from its first bytes)

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, vdi: { type: "string" }, sr: { type: "string" }, format: { type: "string" } });
    if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "needs FILE, URL or -" : `unexpected argument "${positionals[1]}"`);
    if ((values.vdi === undefined) === (values.sr === undefined)) throw new UsageError("needs --vdi VDI or --sr SR (one of them)");
    const format = values.format?.toLowerCase();
    if (format !== undefined && !(DISK_IMPORT_FORMATS as readonly string[]).includes(format)) throw new UsageError(`--format takes ${DISK_IMPORT_FORMATS.join(", ")}, not "${values.format}"`);
    const file = positionals[0]!;
    return withClient(values, async (client) => {
      const vdi = values.vdi === undefined ? undefined : await resolveRef(client, "VDI", values.vdi, true);
      const sr = values.sr === undefined ? undefined : await resolveRef(client, "SR", values.sr, true);
      const sniffed = format === undefined ? await sniffSource(file) : { format };
      if (format === undefined) process.stderr.write(`${file === "-" ? "stdin" : file}: ${sniffed.format}\n`);
      const task = await putArchive(client, "import_raw_vdi", { vdi, sr_id: sr, format: sniffed.format }, file, sniffed.source);
      return importOutcome(client, task, async (done) => {
        const ref = z.string().parse(taskResult(done));
        const record = await client.call(z.looseObject({ uuid: z.string(), name_label: z.string() }), "VDI.get_record", ref);
        process.stdout.write(`${record.uuid}  ${record.name_label}\n`);
        return 0;
      });
    });
  },
};

// ---- Export

/** What FILE.part.json records: enough to ask for the rest of the same export. */
const zSidecar = z.object({
  version: z.literal(2),
  /** The resource and what it exports (a VM's or a VDI's uuid), and the rest of its query (compression, format, base). */
  path: z.enum(["export", "export_raw_vdi"]),
  subject: z.string(),
  query: z.record(z.string(), z.string()),
  /** null: the toolstack named none (xapi does not), so there is nothing to resume against. */
  etag: z.string().nullable(),
  /** Bytes of FILE.part known on disk (synced) at the last checkpoint. */
  bytes: z.number().int().nonnegative(),
  /** The boot the writer ran in: within it, the page cache makes the whole .part good, not only `bytes`. */
  boot: z.string(),
});
type Sidecar = z.infer<typeof zSidecar>;

/** How often a checkpoint syncs FILE.part and records its size. */
const CHECKPOINT_MS = 5_000;

async function bootId(): Promise<string> {
  return (await readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => "")).trim();
}

/** Replaces the sidecar atomically (a crash leaves the old one or the new, never half). */
async function writeSidecar(path: string, sidecar: Sidecar): Promise<void> {
  const temp = `${path}.tmp`;
  const handle = await open(temp, "w");
  try {
    await handle.writeFile(`${JSON.stringify(sidecar)}\n`);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await rename(temp, path);
}

async function readSidecar(path: string): Promise<Sidecar | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const parsed = zSidecar.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${path} is not an export's sidecar: ${parsed.error.issues[0]?.message ?? ""}`);
  return parsed.data;
}

async function syncDir(path: string): Promise<void> {
  const handle = await open(dirname(path), "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Writes at `position` on, syncing and calling `checkpoint(end)` every CHECKPOINT_MS; `position` is where it got. */
class PartWriter extends Writable {
  position: number;
  /** Why writing stopped here (a full disk, say), as against the export failing or being interrupted. */
  failure: Error | undefined;
  readonly #handle: FileHandle;
  readonly #checkpoint: (end: number) => Promise<void>;
  #last = Date.now();
  /** The write in flight: a destroy (Ctrl-C) and sync wait for it, so nothing lands after the checkpoint. */
  #pending: Promise<void> = Promise.resolve();

  constructor(handle: FileHandle, position: number, checkpoint: (end: number) => Promise<void>) {
    super({ highWaterMark: 1024 * 1024 });
    this.#handle = handle;
    this.position = position;
    this.#checkpoint = checkpoint;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.#pending = this.#put(chunk);
    this.#pending.then(
      () => done(),
      (error: Error) => done((this.failure ??= error)),
    );
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.#pending.then(() => done(error), () => done(error));
  }

  async #put(chunk: Buffer): Promise<void> {
    for (let at = 0; at < chunk.length; ) {
      const { bytesWritten } = await this.#handle.write(chunk, at, chunk.length - at, this.position);
      at += bytesWritten;
      this.position += bytesWritten;
    }
    if (Date.now() - this.#last >= CHECKPOINT_MS) await this.#flush();
  }

  async #flush(): Promise<void> {
    await this.#handle.datasync();
    await this.#checkpoint(this.position);
    this.#last = Date.now();
  }

  /** Once the write in flight is done: makes what is written durable and records it. */
  async sync(): Promise<void> {
    await this.#pending.catch(() => undefined);
    await this.#flush();
  }
}

interface ExportRequest {
  path: "export" | "export_metadata" | "export_raw_vdi";
  /** The command that made it, for the hint to resume. */
  verb: string;
  /** What is exported: a VM's or a VDI's uuid. */
  subject: string;
  /** The query naming it and how (uuid or vdi; compression, or format and base); undefined values are left out. */
  query: Record<string, string | undefined>;
  resumeFrom?: { offset: number; etag: string };
}

/** The query's values that are set. */
function given(query: ExportRequest["query"]): Record<string, string> {
  return Object.fromEntries(Object.entries(query).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** GET an export; a 412 of a resume answers "changed". */
async function startExport(client: XenApiClient, request: ExportRequest): Promise<IncomingMessage | "changed"> {
  const query = { ...request.query, offset: request.resumeFrom?.offset.toString(), etag: request.resumeFrom?.etag };
  const { response } = await get(endpoint(client, request.path, query));
  if (response.statusCode === 412 && request.resumeFrom !== undefined) {
    response.resume();
    return "changed";
  }
  if (response.statusCode !== 200) throw await refused("the export", response);
  if (request.resumeFrom !== undefined && response.headers["x-hangar-offset"] !== String(request.resumeFrom.offset)) {
    response.destroy();
    throw new Error(`the toolstack did not resume at byte ${request.resumeFrom.offset} (x-hangar-offset: ${String(response.headers["x-hangar-offset"] ?? "none")}): run again without --resume`);
  }
  return response;
}

/**
 * Streams an export's body into `sink` and follows its task. Answers the finished task, or null when
 * interrupted (the toolstack cancels the export when we hang up).
 */
async function receive(client: XenApiClient, response: IncomingMessage, sink: Writable, progress: TransferProgress, signal: AbortSignal, end = true): Promise<TaskRecord | null> {
  const task = ResourceTask.of(client, response);
  const stopFollowing = task.followProgress((fraction) => (progress.task = fraction));
  let streamError: unknown;
  try {
    await pipeline(response, counter((n) => (progress.bytes += n)), sink, { signal, end });
  } catch (error) {
    streamError = error;
  } finally {
    stopFollowing();
  }
  if (signal.aborted) {
    progress.stop(null);
    return null;
  }
  const record = await task.done();
  progress.stop(record.status === "success" ? undefined : null);
  if (record.status === "success" && streamError !== undefined) throw new Error(`receiving the export: ${(streamError as Error).message}`);
  return record;
}

async function resolveVm(client: XenApiClient, given: string): Promise<string> {
  return client.call(z.string(), "VM.get_uuid", await resolveRef(client, "VM", given, true));
}

/** An export (whole or metadata) to stdout. */
async function exportToStdout(client: XenApiClient, request: ExportRequest): Promise<number> {
  const response = await startExport(client, request);
  if (response === "changed") throw new Error("unexpected 412");
  const progress = new TransferProgress("received", null);
  const task = await interruptible((signal) => receive(client, response, process.stdout, progress, signal, false));
  if (task === null) return INTERRUPTED;
  if (task.status === "success") return 0;
  process.stderr.write(`export ${failure(task)}\n`);
  return 1;
}

/** The command-line option that sets a query key, for messages. */
const OPTION_OF: Record<string, string> = { use_compression: "--compress", format: "--format", base: "--base" };

/**
 * Where an interrupted export left off: the good bytes of FILE.part and its sidecar, or undefined to start over.
 * What the command line sets of the query must be what the sidecar has; what it leaves out comes from there.
 */
async function resumePoint(part: string, sidecarPath: string, request: ExportRequest): Promise<Sidecar | undefined> {
  const sidecar = await readSidecar(sidecarPath);
  const size = await stat(part).then((info) => info.size, () => undefined);
  if (sidecar === undefined || size === undefined) {
    process.stderr.write(`nothing to resume (${sidecar === undefined ? sidecarPath : part} is missing): exporting from the start\n`);
    return undefined;
  }
  if (sidecar.path !== request.path || sidecar.subject !== request.subject) throw new Error(`${part} is an export of ${sidecar.path === "export" ? "VM" : "VDI"} ${sidecar.subject}, not of ${request.subject}: remove it or export to another FILE`);
  for (const [key, value] of Object.entries(given(request.query))) {
    if (sidecar.query[key] !== value) throw new UsageError(`${part} was exported with ${OPTION_OF[key] ?? key} ${sidecar.query[key] ?? "(none)"}, not ${value}: resume it with that`);
  }
  // Within the writer's boot everything in the file was written (the page cache has it): sync it and keep it.
  // After a reboot only the synced checkpoint is sure.
  const handle = await open(part, "r+");
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
  const boot = await bootId();
  const good = boot !== "" && boot === sidecar.boot ? size : Math.min(size, sidecar.bytes);
  if (good < size) await truncate(part, good);
  return { ...sidecar, bytes: good };
}

/** An export to FILE by way of FILE.part and its sidecar; renamed when the task succeeded. */
async function exportToFile(client: XenApiClient, request: ExportRequest & { path: Sidecar["path"] }, file: string, resume: boolean): Promise<number> {
  const part = `${file}.part`;
  const sidecarPath = `${part}.json`;
  const from = resume ? await resumePoint(part, sidecarPath, request) : undefined;
  if (from?.etag === null) process.stderr.write(`the toolstack gave ${part} no etag, so it cannot be resumed: exporting from the start\n`);
  if (from !== undefined) request = { ...request, query: { ...from.query, ...given(request.query) }, resumeFrom: from.bytes > 0 && from.etag !== null ? { offset: from.bytes, etag: from.etag } : undefined };
  let response = await startExport(client, request);
  if (response === "changed") {
    process.stderr.write(`the ${request.path === "export" ? "VM" : "VDI"} changed since ${part} was begun (HTTP 412): exporting it again from the start\n`);
    request = { ...request, resumeFrom: undefined };
    response = await startExport(client, request);
    if (response === "changed") throw new Error("unexpected 412");
  }
  const offset = request.resumeFrom?.offset ?? 0;
  if (offset > 0) process.stderr.write(`resuming ${part} at byte ${offset} (${formatSize(offset)})\n`);
  const sidecar: Sidecar = { version: 2, path: request.path, subject: request.subject, query: given(request.query), etag: response.headers.etag ?? null, bytes: offset, boot: await bootId() };
  await writeSidecar(sidecarPath, sidecar);
  const handle = await open(part, offset > 0 ? "r+" : "w");
  const writer = new PartWriter(handle, offset, (bytes) => writeSidecar(sidecarPath, { ...sidecar, bytes }));
  const progress = new TransferProgress("received", null, offset);
  let task: TaskRecord | null;
  try {
    task = await interruptible((signal) => receive(client, response, writer, progress, signal));
    await writer.sync();
  } finally {
    await handle.close();
  }
  if (task === null) {
    process.stderr.write(`interrupted: ${part} keeps ${formatSize(writer.position)}; "hangar ${request.verb} ${request.subject} ${file} --resume" continues it\n`);
    return INTERRUPTED;
  }
  if (writer.failure !== undefined) {
    process.stderr.write(`writing ${part}: ${writer.failure.message}\n${part} keeps ${formatSize(writer.position)} (--resume continues it once that is fixed)\n`);
    return 1;
  }
  if (task.status !== "success") {
    process.stderr.write(`export ${failure(task)}\n${part} keeps ${formatSize(writer.position)} (--resume may continue it)\n`);
    return 1;
  }
  await rename(part, file);
  await syncDir(file);
  await rm(sidecarPath, { force: true });
  process.stderr.write(`exported to ${file}\n`);
  return 0;
}

const COMPRESSIONS = ["gzip", "zstd"] as const;

const vmExport: Command = {
  summary: "export a VM to an XVA or OVA file (resumable), or to stdout",
  help: `Usage: hangar vm-export VM FILE|- [--format xva|ova] [--compress gzip|zstd] [--resume]

Exports VM (uuid, name or OpaqueRef) as an XVA archive, or with --format ova (the default for a FILE named
.ova) as an OVA: an OVF 1.0 descriptor, a streamOptimized VMDK per disk and a SHA-256 manifest, which
VMware, VirtualBox, Proxmox and Hangar import. The data goes to FILE.part, with FILE.part.json beside it
recording the export (VM, format, compression, etag, bytes safely written); FILE.part becomes FILE once
the export's task succeeded. An interrupted export (Ctrl-C, a lost connection, a crash) keeps both, and
--resume asks the toolstack for the rest of the same export; if the VM changed since, it starts over. "-"
writes to stdout (no resume). Progress goes to stderr: a bar on a terminal, otherwise a line every 10 s.

Options:
  --format xva|ova      the archive's format (default: ova for a FILE named .ova, else xva)
  --compress gzip|zstd  compress an XVA (importers detect it)
  --resume              continue FILE.part from where it stopped

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, format: { type: "string" }, compress: { type: "string" }, resume: { type: "boolean" } });
    if (positionals.length !== 2) throw new UsageError(positionals.length < 2 ? "needs VM and FILE" : `unexpected argument "${positionals[2]}"`);
    const compress = values.compress;
    if (compress !== undefined && !(COMPRESSIONS as readonly string[]).includes(compress)) throw new UsageError(`--compress takes gzip or zstd, not "${compress}"`);
    const [vmGiven, file] = positionals as [string, string];
    const format = values.format?.toLowerCase() ?? (/\.ova$/i.test(file) ? "ova" : "xva");
    if (format !== "xva" && format !== "ova") throw new UsageError(`--format takes xva or ova, not "${values.format}"`);
    if (format === "ova" && compress !== undefined) throw new UsageError("--compress is for XVA archives: an OVA's VMDKs are its own format");
    if (file === "-" && values.resume) throw new UsageError("--resume needs a FILE, not stdout");
    return withClient(values, async (client) => {
      const vm = await resolveVm(client, vmGiven);
      const request = { path: "export" as const, verb: "vm-export", subject: vm, query: { uuid: vm, use_compression: compress, format: format === "ova" ? "ova" : undefined } };
      if (file === "-") return exportToStdout(client, request);
      return exportToFile(client, request, file, values.resume ?? false);
    });
  },
};

const DISK_EXPORT_FORMATS = ["raw", "vhd", "qcow2", "vmdk", "tar"] as const;

/** The disk image format FILE's name asks for (.img is raw), or undefined when it names none. */
function formatOfName(file: string): string | undefined {
  const extension = /\.([a-z0-9]+)$/i.exec(file)?.[1]?.toLowerCase();
  if (extension === "img") return "raw";
  return (DISK_IMPORT_FORMATS as readonly string[]).includes(extension ?? "") ? extension : undefined;
}

const vdiExport: Command = {
  summary: "export a VDI as raw, VHD, qcow2, VMDK or tar (resumable), whole or as a delta",
  help: `Usage: hangar vdi-export VDI FILE|- [--format FORMAT] [--base VDI] [--resume]

Exports VDI (uuid, name or OpaqueRef) as a disk image: FORMAT is raw, vhd, qcow2, vmdk (streamOptimized) or
tar (xapi's one-disk tar); without --format it comes from FILE's extension, raw otherwise. With --base (a
snapshot of VDI, or the VDI it is a snapshot of) only what differs from it is exported: a VHD or qcow2 or VMDK
whose parent is "<base uuid>.<format>", xapi's chunked raw, or a tar of the blocks that differ. The data goes to
FILE.part with FILE.part.json beside it; FILE.part becomes FILE once the export's task succeeded, and --resume
continues an interrupted export. "-" writes to stdout. Progress goes to stderr.

Options:
  --format FORMAT  the image format (default: FILE's extension, else raw)
  --base VDI       export only what differs from this VDI of the same chain
  --resume         continue FILE.part from where it stopped

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, { ...CONNECTION_OPTIONS, format: { type: "string" }, base: { type: "string" }, resume: { type: "boolean" } });
    if (positionals.length !== 2) throw new UsageError(positionals.length < 2 ? "needs VDI and FILE" : `unexpected argument "${positionals[2]}"`);
    const [vdiGiven, file] = positionals as [string, string];
    const format = values.format?.toLowerCase() ?? formatOfName(file) ?? "raw";
    if (!(DISK_EXPORT_FORMATS as readonly string[]).includes(format)) throw new UsageError(`${values.format === undefined ? `${file} names` : "--format"} ${format}: exports are ${DISK_EXPORT_FORMATS.join(", ")}`);
    if (file === "-" && values.resume) throw new UsageError("--resume needs a FILE, not stdout");
    return withClient(values, async (client) => {
      const uuidOf = async (given: string) => client.call(z.string(), "VDI.get_uuid", await resolveRef(client, "VDI", given, true));
      const vdi = await uuidOf(vdiGiven);
      const base = values.base === undefined ? undefined : await uuidOf(values.base);
      const request = { path: "export_raw_vdi" as const, verb: "vdi-export", subject: vdi, query: { vdi, format, base } };
      if (file === "-") return exportToStdout(client, request);
      return exportToFile(client, request, file, values.resume ?? false);
    });
  },
};

const vmExportMetadata: Command = {
  summary: "export a VM's metadata (no disk data) to a file, or to stdout",
  help: `Usage: hangar vm-export-metadata VM FILE|-

Writes VM's metadata (a tar holding ova.xml: the VM, its disks' and networks' records, no data) to FILE,
or to stdout for "-". vm-import-metadata makes a VM of it again.

${CONNECTION_HELP}`,
  async run(argv) {
    const { values, positionals } = parseCommandLine(argv, CONNECTION_OPTIONS);
    if (positionals.length !== 2) throw new UsageError(positionals.length < 2 ? "needs VM and FILE" : `unexpected argument "${positionals[2]}"`);
    const [vmGiven, file] = positionals as [string, string];
    return withClient(values, async (client) => {
      const vm = await resolveVm(client, vmGiven);
      const request: ExportRequest = { path: "export_metadata", verb: "vm-export-metadata", subject: vm, query: { uuid: vm } };
      if (file === "-") return exportToStdout(client, request);
      const response = await startExport(client, request);
      if (response === "changed") throw new Error("unexpected 412");
      const temp = `${file}.part`;
      const handle = await open(temp, "w");
      const writer = new PartWriter(handle, 0, async () => {});
      let task: TaskRecord | null;
      try {
        task = await interruptible((signal) => receive(client, response, writer, new TransferProgress("received", null), signal));
        await writer.sync();
      } finally {
        await handle.close();
      }
      if (task?.status === "success") {
        await rename(temp, file);
        return 0;
      }
      await rm(temp, { force: true });
      if (task === null) return INTERRUPTED;
      process.stderr.write(`export ${failure(task)}\n`);
      return 1;
    });
  },
};

export const transferCommands: Record<string, Command> = {
  "vm-import": vmImport,
  "vm-export": vmExport,
  "vm-export-metadata": vmExportMetadata,
  "vm-import-metadata": vmImportMetadata,
  "vdi-import": vdiImport,
  "vdi-export": vdiExport,
};
