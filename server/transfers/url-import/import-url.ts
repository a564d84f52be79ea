// Import from URL: the console fetches the archive (safe-fetch.ts) into a spool file, and the same pipeline as
// a browser upload imports it while it arrives (when the size is known up front; otherwise once it is in).
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { rm } from "node:fs/promises";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ConsoleSession } from "../../auth/session.ts";
import type { XenApiClient } from "../../toolstack/xenapi/client.ts";
import { cancelPipeline, ensurePipeline, notifyUpload, runningPipeline } from "../upload/pipeline.ts";
import { readState, spoolFile, type UploadState, writeState } from "../upload/state.ts";
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

/** A download that stalls this long is given up. */
const IDLE_TIMEOUT_MS = 60_000;

function fileNameOf(url: URL, disposition: string | undefined): string {
  const fromHeader = disposition === undefined ? undefined : /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1];
  const name = decodeURIComponent(fromHeader ?? url.pathname.split("/").pop() ?? "").trim();
  if (name === "") return "download.xva";
  return IMPORTABLE_NAME.test(name) ? name : `${name}.xva`;
}

export async function startUrlImport(xapi: XenApiClient, session: ConsoleSession, input: { url: string; sr: string }): Promise<{ id: string }> {
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
  const state: UploadState = { id, fileName, fingerprint: url.toString(), sr: target.ref, srName: target.name, length: length ?? 0, user: session.user, session: session.session, task: null, attempts: 0, status: "uploading", error: null, vms: [], created: now, updated: now, source: "url", url: url.toString() };
  await writeState(state);
  const hooks = { removeSpool: removeUploadSpool };
  downloads.set(id, abort);
  // Known size: import while downloading.
  if (length !== undefined) ensurePipeline(state, hooks);
  void download(state, response, length).finally(() => downloads.delete(id)).then(
    async (received) => {
      if (length === undefined) {
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
      await writeState({ ...current, status: "failed", error: error instanceof UrlRefusal ? error.message : `The download from ${url.host} failed: ${error.message}` });
      await rm(spoolFile(id), { force: true });
    },
  );
  return { id };
}

/** The body into the spool, each chunk announced to the import; the size limit and the idle timeout enforced. */
async function download(state: UploadState, response: import("node:http").IncomingMessage, length: number | undefined): Promise<number> {
  let received = 0;
  const limit = length;
  response.socket.setTimeout(IDLE_TIMEOUT_MS, () => response.destroy(new UrlRefusal(`The download stalled for ${IDLE_TIMEOUT_MS / 1000} s.`)));
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      if (limit !== undefined && received > limit) return callback(new UrlRefusal("The server sent more bytes than it announced."));
      callback(null, chunk);
    },
  });
  const out = createWriteStream(spoolFile(state.id));
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
