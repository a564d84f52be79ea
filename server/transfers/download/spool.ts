// Export spools: every export the console serves is written to `<data dir>/transfers/exports/` while it
// streams, so that a broken download resumes from the console's disk (the same bytes, whatever happened to
// the connection) and, once complete, is served with its length and any Range. A spool is two files: the
// archive (`<id>.xva`, growing while the export runs) and its facts (`<id>.json`, size null until complete).
// Spools are removed after HANGAR_TRANSFER_RETENTION_S without use, and sooner, oldest first, when the disk
// runs low (below HANGAR_TRANSFER_MIN_FREE_MB).
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rename, rm, stat, statfs, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { dataDir } from "../../config.ts";
import { transferMinFreeBytes, transferRetentionMs } from "../settings.ts";

export const ZCompression = z.enum(["none", "gzip", "zstd"]);
export type Compression = z.infer<typeof ZCompression>;

/** What an export is: a VM as an XVA or an OVA; a VDI in a disk format. */
export const ZExportFormat = z.enum(["xva", "ova", "raw", "vhd", "qcow2", "vmdk"]);
export type ExportFormat = z.infer<typeof ZExportFormat>;
export const DISK_FORMATS: readonly ExportFormat[] = ["raw", "vhd", "qcow2", "vmdk"];

/** Which export of a subject a spool holds: its format, an XVA's compression, a disk delta's base. */
export interface ExportKind {
  format: ExportFormat;
  compression: Compression;
  /** A disk delta's base (a VDI uuid), or null for the whole disk. */
  base: string | null;
}

export function sameKind(a: ExportKind, b: ExportKind): boolean {
  return a.format === b.format && a.compression === b.compression && a.base === b.base;
}

export const ZSpoolMeta = z.object({
  id: z.string(),
  /** The toolstack's ETag of this export: names exactly these bytes (it carries the export's date). */
  etag: z.string(),
  /** The uuid of what is exported: the VM's, or for a disk format the VDI's. */
  vmUuid: z.string(),
  compression: ZCompression,
  format: ZExportFormat.default("xva"),
  base: z.string().nullable().default(null),
  /** Content-Disposition the toolstack gave (the VM's name). */
  disposition: z.string(),
  /** The task the export first ran in (the Export dialog's), so its URL names this export. */
  task: z.string().optional(),
  created: z.number(),
  /** Bytes of the whole export; null while it is not complete. */
  size: z.number().int().nonnegative().nullable(),
});
export type SpoolMeta = z.output<typeof ZSpoolMeta>;


/** `<data dir>/transfers/exports`. */
export function exportsDir(): string {
  return join(/* turbopackIgnore: true */ dataDir(), "transfers", "exports");
}


export function spoolId(vmUuid: string, etag: string): string {
  return createHash("sha1").update(`${vmUuid}\n${etag}`).digest("hex").slice(0, 32);
}

export const archivePath = (id: string) => join(/* turbopackIgnore: true */ exportsDir(), `${id}.xva`);
const metaPath = (id: string) => join(/* turbopackIgnore: true */ exportsDir(), `${id}.json`);

export async function writeMeta(meta: SpoolMeta): Promise<void> {
  await mkdir(exportsDir(), { recursive: true });
  const tmp = `${metaPath(meta.id)}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(meta));
  await rename(tmp, metaPath(meta.id));
}

export async function readMeta(id: string): Promise<SpoolMeta | undefined> {
  try {
    const parsed = ZSpoolMeta.safeParse(JSON.parse(await readFile(metaPath(id), "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Marks a spool used now (retention counts from the last use). */
export async function touchSpool(id: string): Promise<void> {
  const now = new Date();
  await utimes(metaPath(id), now, now).catch(() => undefined);
}

export interface SpoolEntry {
  meta: SpoolMeta;
  /** Bytes in the archive file now. */
  bytes: number;
  /** Last use (ms): the later of the archive's and the facts' modification times. */
  lastUsed: number;
}

/** Every spool on disk with its facts (files without readable facts are left to the sweep). */
export async function listSpools(): Promise<SpoolEntry[]> {
  let names: string[];
  try {
    names = await readdir(/* turbopackIgnore: true */ exportsDir());
  } catch {
    return [];
  }
  const entries: SpoolEntry[] = [];
  for (const name of names) {
    if (!name.endsWith(".json")) continue;
    const meta = await readMeta(name.slice(0, -5));
    if (meta === undefined) continue;
    const [archive, facts] = await Promise.all([stat(archivePath(meta.id)).catch(() => undefined), stat(metaPath(meta.id)).catch(() => undefined)]);
    entries.push({ meta, bytes: archive?.size ?? 0, lastUsed: Math.max(archive?.mtimeMs ?? 0, facts?.mtimeMs ?? 0) });
  }
  return entries;
}

export async function removeSpool(id: string): Promise<void> {
  await rm(metaPath(id), { force: true });
  await rm(archivePath(id), { force: true });
}

/** Free bytes for unprivileged writers on the spools' disk. */
export async function freeBytes(): Promise<number> {
  await mkdir(exportsDir(), { recursive: true });
  const fs = await statfs(exportsDir());
  return fs.bavail * fs.bsize;
}

/**
 * Removes spools unused for longer than the retention, then, while the disk has less free space than it
 * should, the least recently used of the rest. Spools in `busy` (being written or read) are kept. Answers the
 * ids removed.
 */
export async function sweepSpools(busy: ReadonlySet<string>, now = Date.now()): Promise<string[]> {
  const removed: string[] = [];
  const idle = (await listSpools()).filter((entry) => !busy.has(entry.meta.id)).sort((a, b) => a.lastUsed - b.lastUsed);
  const keep: SpoolEntry[] = [];
  for (const entry of idle) {
    if (now - entry.lastUsed > transferRetentionMs()) {
      await removeSpool(entry.meta.id);
      removed.push(entry.meta.id);
    } else keep.push(entry);
  }
  while (keep.length > 0 && (await freeBytes()) < transferMinFreeBytes()) {
    const oldest = keep.shift()!;
    await removeSpool(oldest.meta.id);
    removed.push(oldest.meta.id);
  }
  // Leftovers: an interrupted write of the facts, an archive whose facts are gone.
  const names = await readdir(/* turbopackIgnore: true */ exportsDir()).catch(() => [] as string[]);
  for (const name of names) {
    const orphan = name.endsWith(".tmp") || (name.endsWith(".xva") && !names.includes(`${name.slice(0, -4)}.json`) && !busy.has(name.slice(0, -4)));
    if (!orphan) continue;
    const file = join(/* turbopackIgnore: true */ exportsDir(), name);
    const info = await stat(file).catch(() => undefined);
    if (info !== undefined && now - info.mtimeMs > 60_000) {
      await rm(file, { force: true });
      removed.push(name);
    }
  }
  return removed;
}
