// vm-import of what is not an XVA: an OVA, an OVF with its disk files beside it, a bare disk image (a VM that
// boots it). Read as it arrives and imported through XenAPI and /import_raw_vdi (server/ova), in a task of its
// own that the Tasks page and Ctrl-C both reach; the new VM's uuid and name on stdout, what the package asked
// that was not done on stderr.
import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { Readable } from "node:stream";
import { z } from "zod";
import { readOvf } from "../ova/descriptor.ts";
import { HEADERLESS_DISK_NAME, type PackageKind, sniffPackage } from "../../lib/file-kind.ts";
import { importDiskImage, importOva, importOvfFiles, type ImportResult, type ImportTarget, type PackageSource } from "../ova/import.ts";
import { runInTask } from "../ova/in-task.ts";
import type { XenApiClient } from "../xenapi/client.ts";
import { interruptible, peekSource, type Source, TransferProgress } from "./transfer-io.ts";

/** What `given` is, when it is something this module imports; undefined for an XVA or a legacy package. */
export async function packageKind(given: string): Promise<{ kind: PackageKind; source?: Source } | undefined> {
  if (given !== "-" && !/^https?:\/\//i.test(given) && (await stat(given)).isDirectory()) return undefined;
  const { head, tail, source } = await peekSource(given);
  const sniffed = sniffPackage(head);
  if (sniffed !== undefined) return sniffed.kind === "xva" ? (source?.stream.destroy(), undefined) : { kind: sniffed, source };
  if (tail?.toString("latin1", 0, 8) === "conectix" || HEADERLESS_DISK_NAME.test(given)) return { kind: { kind: "disk", format: "raw" }, source };
  source?.stream.destroy();
  return undefined;
}

function fileSource(path: string, size: number): PackageSource {
  return {
    name: basename(path),
    length: size,
    rereadable: true,
    open: (start, length) => createReadStream(path, { start, end: length === undefined ? undefined : start + length - 1, highWaterMark: 1024 * 1024 }),
  };
}

/** A stream (URL, stdin) read once: what came before an OVA's descriptor cannot be read again. */
function streamSource(name: string, source: Source): PackageSource {
  let opened: Readable | undefined = source.stream;
  return {
    name,
    length: source.size ?? undefined,
    rereadable: false,
    open(start) {
      if (start !== 0 || opened === undefined) throw new Error(`${name} is a stream: it cannot be read twice`);
      const stream = opened;
      opened = undefined;
      return stream;
    },
  };
}

/** An OVF's files beside it: the manifest first (so only its algorithm is computed), then each file it references. */
async function ovfFiles(path: string): Promise<Map<string, PackageSource>> {
  const ovf = await readOvf(await readFile(path));
  const dir = dirname(path);
  const files = new Map<string, PackageSource>();
  const manifest = `${basename(path).replace(/\.ovf$/i, "")}.mf`;
  const manifestSize = await stat(join(dir, manifest)).then((info) => info.size, () => undefined);
  if (manifestSize !== undefined) files.set(manifest, fileSource(join(dir, manifest), manifestSize));
  for (const file of ovf.files) {
    // A file that is missing is the import's to say (it names it), once the VM's descriptor has been read.
    const size = await stat(join(dir, file.href)).then((info) => info.size, () => undefined);
    if (size !== undefined) files.set(file.href, fileSource(join(dir, file.href), size));
  }
  return files;
}

export interface PackageImportOptions {
  sr: string | undefined;
  force: boolean;
}

/** Imports `given` (see packageKind) and prints the outcome; the exit code. */
export async function importPackage(client: XenApiClient, given: string, found: { kind: PackageKind; source?: Source }, options: PackageImportOptions): Promise<number> {
  const sr = options.sr ?? (await client.call(z.string(), "pool.get_default_SR", (await client.call(z.array(z.string()), "pool.get_all"))[0]));
  const name = given === "-" ? "stdin" : basename(given.replace(/[?#].*$/, ""));
  const source = found.source === undefined ? fileSource(given, (await stat(given)).size) : streamSource(name, found.source);
  const task = await client.call(z.string(), "task.create", `VM import: ${name}`, "hangar vm-import");
  const progress = new TransferProgress("read", source.length ?? null);
  const mark = `cli-${task.replace(/^OpaqueRef:/, "")}`;
  let result: ImportResult;
  try {
    result = await interruptible((signal) =>
      runInTask(client, task, source.length, signal, (control) => {
        const target: ImportTarget = { xapi: client, toolstack: client.url, sr, mark, force: options.force, signal: control.signal, task, progress: (bytes) => control.progress((progress.bytes = bytes)) };
        if (found.kind.kind === "ova") return importOva(target, source);
        if (found.kind.kind === "ovf") {
          if (found.source !== undefined) throw new Error("an OVF descriptor is imported from a file, with its disks beside it");
          return ovfFiles(given).then((files) => importOvfFiles(target, source, files));
        }
        return importDiskImage(target, source, { vm: true });
      }),
    );
  } catch (error) {
    progress.stop(null);
    const status = await client.call(z.string(), "task.get_status", task).catch(() => "");
    process.stderr.write(`import ${status === "cancelled" ? "cancelled" : "failed"}: ${(error as Error).message}\n`);
    return status === "cancelled" ? 130 : 1;
  }
  progress.stop();
  for (const note of result.notes) process.stderr.write(`note: ${note}\n`);
  if (result.vm !== null) {
    const vm = await client.call(z.looseObject({ uuid: z.string(), name_label: z.string() }), "VM.get_record", result.vm);
    process.stdout.write(`${vm.uuid}  ${vm.name_label}\n`);
  }
  return 0;
}
