// What to upload of the files a user dropped or chose, from their first bytes (their names only as a hint, a
// mismatch said in words): XVAs and OVAs as they are; an OVF with the files dropped beside it packed as one OVA
// (descriptor, manifest, then the rest), read only as it is sent; bare disk images set aside for the user to say
// whether each becomes a VM or a disk alone; anything else refused, naming it.
import { HEADERLESS_DISK_NAME, PACKAGE_SNIFF_BYTES, type PackageKind, sniffPackage } from "@/lib/file-kind.ts";
import { tarBlob } from "@/lib/tar-pack.ts";
import { type UploadFile, uploadFileOf } from "./upload-job.ts";

export type Planned =
  | { kind: "upload"; file: UploadFile; note: string | null }
  | { kind: "disk"; file: UploadFile; format: string; note: string | null }
  | { kind: "refused"; name: string; reason: string };

/** A name the console takes an archive under (its bytes then say what it is). */
const ARCHIVE_NAME = /\.(xva|xva\.gz|xva\.zst|xva\.zstd|tar|tar\.gz|tgz|tar\.zst|ova)$/i;
const DISK_NAME = /\.(vmdk|vhd|vhdx|qcow2?|raw|img)$/i;
/** Files that are part of an OVF package without being disks. */
const PACKAGE_PART = /\.(mf|cert)$/i;
/** A drop of more files than this is no VM's package. */
export const MAX_DROPPED_FILES = 500;

const extension = (name: string) => /\.([a-z0-9]+)$/i.exec(name)?.[1]?.toLowerCase() ?? "";
const WORDS: Record<string, string> = { ova: "an OVA", xva: "an XVA", ovf: "an OVF descriptor" };
const describeKind = (kind: PackageKind) => (kind.kind === "disk" ? `a ${kind.format} image` : WORDS[kind.kind]!);

/** What a name claims to be, when it claims something its bytes can contradict. */
function claimed(name: string): PackageKind | undefined {
  const ext = extension(name);
  if (ext === "ova" || ext === "ovf" || ext === "xva") return { kind: ext };
  if (ext === "qcow") return { kind: "disk", format: "qcow2" };
  if (["vmdk", "vhdx", "qcow2"].includes(ext)) return { kind: "disk", format: ext };
  return undefined;
}

function mismatch(name: string, kind: PackageKind): string | null {
  const said = claimed(name);
  if (said === undefined || (said.kind === kind.kind && (said.kind !== "disk" || (kind.kind === "disk" && said.format === kind.format)))) return null;
  return `${name} is ${describeKind(kind)}, though its name says ${describeKind(said)}: it is imported as what it is.`;
}

async function headOf(file: File): Promise<Uint8Array> {
  return new Uint8Array(await file.slice(0, PACKAGE_SNIFF_BYTES).arrayBuffer());
}

/** The plan for `files` (see the file's header). */
export async function planUploads(files: readonly File[]): Promise<Planned[]> {
  if (files.length > MAX_DROPPED_FILES) return [{ kind: "refused", name: `${files.length} files`, reason: `more than ${MAX_DROPPED_FILES} files at once: drop a VM's files, or one folder, at a time` }];
  const kinds = await Promise.all(files.map(async (file) => ({ file, kind: sniffPackage(await headOf(file)) })));
  const ovfs = kinds.filter(({ file, kind }) => kind?.kind === "ovf" || (kind === undefined && extension(file.name) === "ovf"));
  const plan: Planned[] = [];
  if (ovfs.length > 1) return [{ kind: "refused", name: ovfs.map((o) => o.file.name).join(", "), reason: "several OVF descriptors at once: drop one VM's OVF with its disks at a time" }];
  const ovf = ovfs[0]?.file;
  const rest = kinds.filter(({ file }) => file !== ovf);
  if (ovf !== undefined) {
    // The OVF's package: every file dropped with it but archives of their own (those go on their own).
    const parts = rest.filter(({ kind }) => !(kind?.kind === "xva" || kind?.kind === "ova")).map(({ file }) => file);
    const base = ovf.name.replace(/\.ovf$/i, "");
    const manifests = parts.filter((file) => PACKAGE_PART.test(file.name));
    const ordered = [ovf, ...manifests, ...parts.filter((file) => !PACKAGE_PART.test(file.name))];
    try {
      const blob = tarBlob(ordered);
      plan.push({ kind: "upload", file: { blob, name: `${base}.ova`, lastModified: Math.max(...ordered.map((file) => file.lastModified)) }, note: `${ovf.name} and ${parts.length} file${parts.length === 1 ? "" : "s"} beside it, sent as one package (${base}.ova).` });
    } catch (error) {
      plan.push({ kind: "refused", name: ovf.name, reason: (error as Error).message });
    }
  }
  for (const { file, kind } of rest) {
    if (ovf !== undefined && !(kind?.kind === "xva" || kind?.kind === "ova")) continue;
    if (kind?.kind === "disk") plan.push({ kind: "disk", file: uploadFileOf(file), format: kind.format, note: mismatch(file.name, kind) });
    else if (kind?.kind === "ova" || kind?.kind === "xva") plan.push({ kind: "upload", file: uploadFileOf(file), note: mismatch(file.name, kind) });
    else if (kind === undefined && HEADERLESS_DISK_NAME.test(file.name)) plan.push({ kind: "disk", file: uploadFileOf(file), format: extension(file.name) === "vhd" ? "vhd" : "raw", note: null });
    else if (kind === undefined && ARCHIVE_NAME.test(file.name)) plan.push({ kind: "upload", file: uploadFileOf(file), note: null });
    else plan.push({ kind: "refused", name: file.name, reason: file.size === 0 ? "an empty file" : DISK_NAME.test(file.name) ? `its bytes are no ${extension(file.name)} image` : "not a file the console imports (an .xva, an .ova, an .ovf with its disks, or a disk image)" });
  }
  return plan;
}

/** The files of a drop, a dropped folder's read through (browsers give a folder's files only this way). */
export async function droppedFiles(transfer: DataTransfer): Promise<File[]> {
  const entries = [...transfer.items].map((item) => item.webkitGetAsEntry?.() ?? null);
  if (entries.every((entry) => entry === null || entry.isFile)) return [...transfer.files];
  const files: File[] = [];
  const walk = async (entry: FileSystemEntry): Promise<void> => {
    if (files.length > MAX_DROPPED_FILES) return;
    if (entry.isFile) {
      files.push(await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject)));
      return;
    }
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    // A directory is read in batches until one comes back empty.
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
      if (batch.length === 0) return;
      for (const child of batch) await walk(child);
    }
  };
  for (const entry of entries) if (entry !== null) await walk(entry);
  return files;
}
