// What the console keeps next to an upload's spool file so that its import survives a console restart: the
// SR, the current toolstack task, the session that started it, and how it ended. One small JSON file per
// upload (`<id>.import-state`, mode 0600: it holds a toolstack session reference).
import { mkdirSync } from "node:fs";
import { readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { dataDir } from "../../config.ts";

export const ZUploadStatus = z.enum(["uploading", "importing", "done", "failed", "cancelled"]);
export type UploadStatus = z.infer<typeof ZUploadStatus>;

/** Whether an upload with this status has ended (imported, failed or cancelled): nothing more happens to it. */
export function isEnded(status: UploadStatus): boolean {
  return status === "done" || status === "failed" || status === "cancelled";
}

export const ZUploadState = z.object({
  id: z.string().regex(/^[A-Za-z0-9_-]+$/),
  fileName: z.string(),
  /** The browser's file identity (size and lastModified), to find a second upload of the same file. */
  fingerprint: z.string(),
  sr: z.string(),
  srName: z.string(),
  length: z.number().int().nonnegative(),
  user: z.string(),
  session: z.string(),
  /** The toolstack task of the current import attempt. */
  task: z.string().nullable(),
  attempts: z.number().int().nonnegative(),
  status: ZUploadStatus,
  error: z.string().nullable(),
  vms: z.array(z.string()),
  created: z.number(),
  updated: z.number(),
  /** Where the bytes come from: a browser upload (tus), or a URL the console fetches. */
  source: z.enum(["upload", "url"]).default("upload"),
  url: z.string().nullable().default(null),
  /** A bare disk image becomes a disk on the SR alone, not a VM that boots it. */
  diskOnly: z.boolean().default(false),
  /** Import even when checksums (an XVA's blocks, an OVA's manifest) do not match. */
  force: z.boolean().default(false),
  /** What the import made besides VMs (a disk alone), and what the file asked that was not done, in words. */
  vdis: z.array(z.string()).default([]),
  notes: z.array(z.string()).default([]),
});
export type UploadState = z.output<typeof ZUploadState>;

const STATE_SUFFIX = ".import-state";

/** `<data dir>/transfers/uploads`, where @tus/file-store keeps the spool files and we keep their state. */
export function uploadSpoolDir(): string {
  // Fixed at first use, as the tus file store's directory is (tests change the data dir as they go).
  const holder = globalThis as { __hangarUploadSpoolDir?: string };
  if (holder.__hangarUploadSpoolDir === undefined) {
    const dir = join(/* turbopackIgnore: true */ dataDir(), "transfers", "uploads");
    mkdirSync(dir, { recursive: true });
    holder.__hangarUploadSpoolDir = dir;
  }
  return holder.__hangarUploadSpoolDir;
}

export function spoolFile(id: string): string {
  return join(/* turbopackIgnore: true */ uploadSpoolDir(), id);
}

function stateFile(id: string): string {
  return join(/* turbopackIgnore: true */ uploadSpoolDir(), `${id}${STATE_SUFFIX}`);
}

export async function readState(id: string): Promise<UploadState | undefined> {
  if (!/^[A-Za-z0-9_-]+$/.test(id)) return undefined;
  try {
    const parsed = ZUploadState.safeParse(JSON.parse(await readFile(stateFile(id), "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Writes of each state file under way, so that they run one after another (see writeState). */
const writing = new Map<string, Promise<void>>();

/**
 * Writes atomically (rename), so a crash never leaves half a state file. Writes of one upload's state run in
 * the order asked: two at once shared the temporary file, and the second rename failed (ENOENT), or an older
 * state could land last.
 */
export function writeState(state: UploadState): Promise<void> {
  const file = stateFile(state.id);
  const text = JSON.stringify({ ...state, updated: Date.now() });
  const written = (writing.get(file) ?? Promise.resolve()).catch(() => undefined).then(async () => {
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, file);
  });
  writing.set(file, written);
  void written.finally(() => {
    if (writing.get(file) === written) writing.delete(file);
  }).catch(() => undefined);
  return written;
}

export async function removeState(id: string): Promise<void> {
  await rm(stateFile(id), { force: true });
}

export async function allStates(): Promise<UploadState[]> {
  const names = await readdir(/* turbopackIgnore: true */ uploadSpoolDir()).catch(() => [] as string[]);
  const states = await Promise.all(names.filter((n) => n.endsWith(STATE_SUFFIX)).map((n) => readState(n.slice(0, -STATE_SUFFIX.length))));
  return states.filter((s) => s !== undefined);
}

