// Import from URL: the console fetches the archive (safe-fetch.ts) into a spool file, and the same pipeline as
// a browser upload imports it while it arrives (when the size is known up front; otherwise once it is in).
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rm, stat, truncate } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ConsoleSession } from "../../auth/session.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { cancelPipeline, ensurePipeline, notifyUpload, runningPipeline } from "../upload/pipeline.ts";
import { allStates, readState, spoolFile, type UploadState, writeState } from "../upload/state.ts";
import { removeUploadSpool } from "../upload/tus.ts";
import { checkUpload, IMPORTABLE_NAME, UploadRefusal } from "../upload/validate.ts";
import { parseImportUrl, safeGet, UrlRefusal } from "./safe-fetch.ts";

/** Downloads in progress, to cancel them (kept across hot reloads in development). */
const downloads = ((globalThis as { __hangarUrlDownloads?: Map<string, AbortController> }).__hangarUrlDownloads ??= new Map());

/** Cancels an import from URL: its download stops, its import is cancelled (the toolstack undoes it), its spool goes. */
export async function cancelUrlImport(id: string): Promise<void> {
  downloads.get(id)?.abort(new UrlRefusal("The import was cancelled."));
  downloads.delete(id);
  await cancelPipeline(id);
  await rm(spoolFile(id), { force: true });
}

/** Stops every download where it is, its import and its state left as they are (tests: a console gone). */
export function stopUrlDownloads(): void {
  for (const abort of downloads.values()) abort.abort(new Error("the console stopped"));
  downloads.clear();
}

/** A download that stalls this long is given up. */
const IDLE_TIMEOUT_MS = 60_000;

function fileNameOf(url: URL, disposition: string | undefined): string {
  const fromHeader = disposition === undefined ? undefined : /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1];
  const name = decodeURIComponent(fromHeader ?? url.pathname.split("/").pop() ?? "").trim();
  if (name === "") return "download.xva";
  return IMPORTABLE_NAME.test(name) ? name : `${name}.xva`;
}

export async function startUrlImport(xapi: XenApiClient, session: ConsoleSession, input: { url: string; sr: string; diskOnly?: boolean; force?: boolean }): Promise<{ id: string }> {
  const url = parseImportUrl(input.url);
  const abort = new AbortController();
  const { response, url: finalUrl } = await safeGet(url, abort.signal);
  const header = response.headers["content-length"];
  const length = header === undefined ? undefined : Number(header);
  const fileName = fileNameOf(finalUrl, response.headers["content-disposition"]);
  let target;
  try {
    target = await checkUpload(xapi, { fileName, sr: input.sr, size: length ?? 1 });
  } catch (error) {
    response.destroy();
    throw error;
  }
  const id = randomBytes(16).toString("hex");
  const now = Date.now();
  const state: UploadState = { id, fileName, fingerprint: url.toString(), sr: target.ref, srName: target.name, length: length ?? 0, user: session.user, session: session.session, task: null, attempts: 0, status: "uploading", error: null, vms: [], created: now, updated: now, source: "url", url: url.toString(), diskOnly: input.diskOnly === true, force: input.force === true, vdis: [], notes: [] };
  await writeState(state);
  fetchInto(state, abort, response, 0);
  return { id };
}

/**
 * The rest of a URL import: the body into the spool from `from`, the import run while it arrives (known
 * size) or once it is all in, a failure recorded in words with the spool removed.
 */
function fetchInto(state: UploadState, abort: AbortController, response: IncomingMessage, from: number): void {
  const { id } = state;
  const known = state.length > 0;
  downloads.set(id, abort);
  if (known) ensurePipeline(state, hooks);
  void download(state, response, known ? state.length : undefined, from).finally(() => downloads.delete(id)).then(
    async (received) => {
      if (!known) {
        const current = (await readState(id)) ?? state;
        const complete = { ...current, length: received };
        await writeState(complete);
        ensurePipeline(complete, hooks);
      }
    },
    async (error: Error) => {
      if (abort.signal.aborted) return;
      if (runningPipeline(id) !== undefined) await cancelPipeline(id);
      const current = (await readState(id)) ?? state;
      await writeState({ ...current, status: "failed", error: error instanceof UrlRefusal ? error.message : `The download from ${new URL(state.url ?? "http://unknown").host} failed: ${error.message}` });
      await rm(spoolFile(id), { force: true });
    },
  );
}

const hooks = { removeSpool: removeUploadSpool };

/**
 * After a console restart: each URL import it was fetching goes on — from the bytes already in its spool when
 * the server serves ranges, else from the start — and its import starts again from the spool.
 */
export async function resumeUrlImports(): Promise<void> {
  for (const state of await allStates()) {
    if (state.source !== "url" || state.url === null || (state.status !== "uploading" && state.status !== "importing") || downloads.has(state.id)) continue;
    const have = await stat(spoolFile(state.id)).then((info) => info.size, () => 0);
    if (state.length > 0 && have >= state.length) {
      ensurePipeline(state, hooks);
      continue;
    }
    const abort = new AbortController();
    try {
      // Unknown length: the bytes so far cannot be checked against anything; fetch it all again.
      const { response, resumedAt } = await safeGet(new URL(state.url), abort.signal, state.length > 0 ? have : 0);
      if (resumedAt === 0) {
        const length = Number(response.headers["content-length"] ?? 0);
        if (state.length > 0 && length !== state.length) {
          response.destroy();
          throw new UrlRefusal(`the file at the URL changed (${length} bytes now, ${state.length} before)`);
        }
        await truncate(spoolFile(state.id), 0).catch(() => undefined);
      }
      fetchInto(state, abort, response, resumedAt);
    } catch (error) {
      await writeState({ ...state, status: "failed", error: error instanceof UrlRefusal ? `The import could not go on after the console restarted: ${error.message}` : `The import could not go on after the console restarted (${(error as Error).message}).` });
      await rm(spoolFile(state.id), { force: true });
    }
  }
}

/** The body into the spool, each chunk announced to the import; the size limit and the idle timeout enforced. */
async function download(state: UploadState, response: IncomingMessage, length: number | undefined, from: number): Promise<number> {
  let received = from;
  const limit = length;
  response.socket.setTimeout(IDLE_TIMEOUT_MS, () => response.destroy(new UrlRefusal(`The download stalled for ${IDLE_TIMEOUT_MS / 1000} s.`)));
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      if (limit !== undefined && received > limit) return callback(new UrlRefusal("The server sent more bytes than it announced."));
      callback(null, chunk);
    },
  });
  // From 0 the spool is written afresh (a server that sent the whole file again); else appended at `from`.
  const out = createWriteStream(spoolFile(state.id), from > 0 ? { flags: "r+", start: from } : {});
  out.on("drain", () => notifyUpload(state.id));
  const ticker = setInterval(() => notifyUpload(state.id), 200);
  try {
    await pipeline(response, counter, out);
  } finally {
    clearInterval(ticker);
  }
  notifyUpload(state.id);
  if (limit !== undefined && received < limit) throw new UrlRefusal(`The download ended after ${received} of ${limit} bytes.`);
  if (received === 0) throw new UploadRefusal(400, "The URL answered an empty file.");
  return received;
}
