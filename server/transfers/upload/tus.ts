// The console's tus endpoint (`/api/upload`): resumable uploads of VM archives into a spool under the data
// dir, each one imported while it arrives (pipeline.ts). Every request needs the console session; an upload is
// checked (file name, SR, free space) before its first byte and belongs to the user who started it.
import { stat, statfs } from "node:fs/promises";
import { verdict } from "../../../lib/access.ts";
import { formatBytes } from "../../../lib/format.ts";
import { accessOf } from "../../auth/access.ts";
import { FileStore } from "@tus/file-store";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { EVENTS, MemoryLocker, Server, type Upload } from "@tus/server";
import { sessionFromHeaders, clientFor, isSessionValid, type ConsoleSession } from "../../auth/session.ts";
import { webHeaders } from "../../web-headers.ts";
import { cancelPipeline, ensurePipeline, failUpload, notifyUpload, runningPipeline } from "./pipeline.ts";
import { transferMinFreeBytes, transferRetentionMs } from "../settings.ts";
import { allStates, isEnded, readState, removeState, spoolFile, uploadSpoolDir, type UploadState, writeState } from "./state.ts";
import { checkUpload, UploadRefusal } from "./validate.ts";
import { acceptedOffset, closeSpool, receivePatch } from "./receive.ts";

export const UPLOAD_PATH = "/api/upload";
/** What an upload's id is made of (tus names uploads in hex); the spool's other files have a dot in their names. */
const UPLOAD_ID_FORM = /^[A-Za-z0-9_-]+$/;
const SWEEP_MS = 10 * 60_000;

interface Tus {
  server: Server;
  store: UploadStore;
  locker: MemoryLocker;
}

const holder = globalThis as { __hangarTus?: Tus; __hangarTusSweep?: NodeJS.Timeout };

function refusal(status: number, message: string) {
  return { status_code: status, body: `${message}\n` };
}

function sessionOf(headers: Headers): ConsoleSession {
  const session = sessionFromHeaders(headers);
  if (session === undefined) throw refusal(401, "Log in to the console to upload VMs.");
  return session;
}

async function removeSpool(store: FileStore, id: string): Promise<void> {
  await closeSpool(id);
  await store.remove(id).catch(async () => {
    const { rm } = await import("node:fs/promises");
    await rm(spoolFile(id), { force: true });
    await rm(`${spoolFile(id)}.json`, { force: true });
  });
}

/** The upload's pipeline, started (again) if it is not running: after a console restart, the browser's resume does it. */
async function resume(store: FileStore, state: UploadState, session: ConsoleSession): Promise<void> {
  const running = runningPipeline(state.id);
  if (running !== undefined) return running.adoptSession(session.session);
  if (isEnded(state.status)) return;
  // The browser's session is the live one: an older one may have ended meanwhile.
  const fresh = { ...state, session: session.session };
  await writeState(fresh);
  ensurePipeline(fresh, { removeSpool: (id) => removeSpool(store, id) });
}

/** How long the toolstack's word that a session holds is taken (a PATCH every few ms need not ask each time). */
const SESSION_CHECK_MS = 5_000;
const checkedSessions = ((globalThis as { __hangarTusSessions?: Map<string, number> }).__hangarTusSessions ??= new Map());

/**
 * Whether the toolstack still honours the session: the cookie says who logged in, not that the session holds
 * (a cookie of a session logged out since must not go on with an upload). A toolstack that does not answer
 * leaves it to the import, as a page does (requireSession).
 */
async function sessionHolds(session: ConsoleSession): Promise<boolean> {
  const now = Date.now();
  if (now - (checkedSessions.get(session.session) ?? -Infinity) < SESSION_CHECK_MS) return true;
  const holds = await isSessionValid(session).catch(() => true);
  for (const [ref, at] of checkedSessions) if (now - at >= SESSION_CHECK_MS) checkedSessions.delete(ref);
  if (holds) checkedSessions.set(session.session, now);
  return holds;
}

/**
 * What every tus request must pass: the console session, and for an existing upload its owner and a state
 * that takes the method (a resume restarts the import if it is not running).
 */
async function admit(method: string, headers: Headers, id: string): Promise<void> {
  const session = sessionOf(headers);
  if (method === "POST" || method === "OPTIONS") return;
  // Only an upload's id names an upload: `<id>.json` or `<id>.import-state` would pass the owner check below
  // (which finds no state for them) and let tus's store remove that file of someone's upload.
  if (!UPLOAD_ID_FORM.test(id)) throw refusal(404, "There is no such upload.");
  // A running import holds the upload's state in memory: no disk read on every PATCH.
  const state = runningPipeline(id)?.state ?? (await readState(id));
  if (state === undefined) return;
  if (state.user !== session.user) throw refusal(403, "This upload belongs to another user.");
  if (!(await sessionHolds(session))) throw refusal(401, "Your session has ended: log in to the console again to go on with the upload.");
  if (state.status === "failed" && method !== "DELETE") throw refusal(422, state.error ?? "The import failed.");
  if (state.status === "cancelled" && method !== "DELETE") throw refusal(410, "This upload was cancelled.");
  if (method === "PATCH" || method === "HEAD") await resume(tus().store, state, session);
}

/** tus's file store, whose offset of an upload being received is the one the console has taken (receive.ts). */
class UploadStore extends FileStore {
  override async getUpload(id: string): Promise<Upload> {
    const upload = await super.getUpload(id);
    upload.offset = acceptedOffset(id) ?? upload.offset;
    return upload;
  }
}

function create(): Tus {
  const store = new UploadStore({ directory: uploadSpoolDir(), expirationPeriodInMilliseconds: transferRetentionMs() });
  // Shared with the PATCHes received off @tus/server (receive.ts): one lock per upload, whoever asks.
  const locker = new MemoryLocker();
  const server = new Server({
    path: UPLOAD_PATH,
    datastore: store,
    locker,
    relativeLocation: true,
    // Same-origin only: no Access-Control-Allow-Origin for other sites.
    allowedOrigins: [],
    postReceiveInterval: 200,
    async onIncomingRequest(req, id) {
      await admit(req.method, req.headers, id);
    },
    async onUploadCreate(req, upload: Upload) {
      const session = sessionOf(req.headers);
      const metadata = upload.metadata ?? {};
      const fileName = metadata.filename ?? metadata.name ?? undefined;
      try {
        // Before a byte is kept: the import it would become is a VM administrator's.
        const judged = verdict(await accessOf(session, clientFor(session)), "vms.import");
        if (!judged.allowed) throw new UploadRefusal(403, `You cannot import VMs or disks: ${judged.reason}`);
        const target = await checkUpload(clientFor(session), { fileName: fileName ?? undefined, sr: metadata.sr ?? undefined, size: upload.size });
        // The spool holds the whole file: the console's own disk needs room for it too.
        const free = await spoolFree();
        if (upload.size! > free) {
          await sweepUploads(Date.now(), { lowDisk: true });
          if (upload.size! > (await spoolFree())) throw new UploadRefusal(507, `The console's disk has ${formatBytes(free)} free for its copy of the upload, not enough for ${fileName} (${formatBytes(upload.size!)}).`);
        }
        const fingerprint = `${upload.size}:${metadata.lastModified ?? ""}`;
        // One import per file: the same file still uploading elsewhere (another tab's own upload) is refused.
        const twin = (await allStates()).find((s) => s.user === session.user && s.fileName === fileName && s.fingerprint === fingerprint && s.sr === target.ref && (s.status === "uploading" || s.status === "importing") && runningPipeline(s.id) !== undefined);
        if (twin !== undefined) throw new UploadRefusal(409, `${fileName} is already being uploaded to ${target.name} (in another tab or window): resume it there, or cancel that upload first.`);
        const now = Date.now();
        await writeState({ id: upload.id, fileName: fileName!, fingerprint, sr: target.ref, srName: target.name, length: upload.size!, user: session.user, session: session.session, task: null, attempts: 0, status: "uploading", error: null, vms: [], created: now, updated: now, source: "upload", url: null, diskOnly: metadata.diskOnly === "true", force: metadata.force === "true", vdis: [], notes: [] });
        return { metadata: { ...metadata, sr: target.ref } };
      } catch (error) {
        if (error instanceof UploadRefusal) throw refusal(error.status, error.message);
        throw refusal(502, `The toolstack could not check the upload: ${(error as Error).message}`);
      }
    },
    onResponseError(_req, error) {
      if ("status_code" in error) return undefined;
      return { status_code: 500, body: `The upload failed in the console: ${error.message}\n` };
    },
  });
  server.on(EVENTS.POST_CREATE, (_req, upload) => {
    void readState(upload.id).then((state) => {
      if (state !== undefined) ensurePipeline(state, { removeSpool: (id) => removeSpool(store, id) });
    });
  });
  server.on(EVENTS.POST_RECEIVE, (_req, upload) => notifyUpload(upload.id));
  server.on(EVENTS.POST_FINISH, (_req, _res, upload) => notifyUpload(upload.id));
  server.on(EVENTS.POST_TERMINATE, (_req, _res, id) => void closeSpool(id).then(() => cancelPipeline(id)));
  return { server, store, locker };
}

export function tus(): Tus {
  holder.__hangarTus ??= create();
  if (holder.__hangarTusSweep === undefined) {
    holder.__hangarTusSweep = setInterval(() => void sweepUploads().catch(() => undefined), SWEEP_MS);
    holder.__hangarTusSweep.unref();
  }
  return holder.__hangarTus;
}

/** Removes an upload's spool file and tus's record of it. */
export function removeUploadSpool(id: string): Promise<void> {
  return removeSpool(tus().store, id);
}

/**
 * After a console restart: an upload whose bytes all arrived has no browser request left to restart its
 * import (the others restart on the browser's resume), so its import starts again from the spool here.
 */
export async function resumeCompleteUploads(): Promise<void> {
  for (const state of await allStates()) {
    if (state.source !== "upload" || (state.status !== "uploading" && state.status !== "importing") || runningPipeline(state.id) !== undefined) continue;
    const have = await stat(spoolFile(state.id)).then((info) => info.size, () => 0);
    if (have >= state.length) ensurePipeline(state, { removeSpool: removeUploadSpool });
  }
}

const UPLOAD_ID = new RegExp(`^${UPLOAD_PATH}/(${UPLOAD_ID_FORM.source.slice(1, -1)})$`);

/** The route: a PATCH of an upload's bytes is received here (receive.ts), every other request by @tus/server. */
export async function handleUpload(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { server, store, locker } = tus();
  const id = req.method === "PATCH" ? UPLOAD_ID.exec(new URL(req.url ?? "/", "http://console").pathname)?.[1] : undefined;
  if (id === undefined) return answerByTus(server, req, res);
  await receivePatch(req, res, {
    id,
    store,
    locker,
    admit: (headers) => admit("PATCH", headers, id),
    written: () => notifyUpload(id),
    failed: (error) => {
      const why = (error as NodeJS.ErrnoException).code === "ENOSPC" ? "its disk is full" : error.message;
      console.error(`upload ${id}: the spool could not be written: ${error.message}`);
      // The spool goes before the failure is recorded: on a full disk (the state file shares it), recording it
      // needs the room the spool held.
      void failUpload(id, `The console could not keep the upload on its disk (${why}); upload the file again.`, () =>
        removeSpool(store, id).catch((failure: Error) => console.error(`upload ${id}: removing its spool: ${failure.message}`)),
      ).catch((failure: Error) => console.error(`upload ${id}: failing it: ${failure.message}`));
    },
  });
}

/**
 * Any other tus request, through @tus/server's web handler: their bodies are empty or small (a POST may carry
 * the first bytes). Not its Node `handle`, whose answer Next's API response mangles (headers set as arrays).
 */
async function answerByTus(server: Server, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const headers = webHeaders(req);
  const hasBody = req.method !== "GET" && req.method !== "HEAD" && req.method !== "OPTIONS";
  const request = new Request(new URL(req.url ?? "/", "http://console"), { method: req.method, headers, body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined, duplex: "half" } as RequestInit);
  const response = await server.handleWeb(request);
  // A body tus left unread (a refusal before it got to it) is still on the connection, where the client's next
  // request would be read as its rest: the connection goes with this answer.
  const unread = hasBody && !req.complete;
  res.writeHead(response.status, { ...Object.fromEntries(response.headers), ...(unread ? { connection: "close" } : {}) });
  res.end(req.method === "HEAD" ? undefined : Buffer.from(await response.arrayBuffer()));
}

/** Free bytes on the disk of the spool directory. */
async function spoolFree(): Promise<number> {
  const fs = await statfs(uploadSpoolDir());
  return fs.bavail * fs.bsize;
}


/**
 * Removes ended uploads (and their spools) older than the retention, or all ended ones when the disk runs low,
 * and uploads left unfinished that long.
 */
export async function sweepUploads(now = Date.now(), options: { lowDisk?: boolean } = {}): Promise<number> {
  const lowDisk = options.lowDisk === true || (await spoolFree()) < transferMinFreeBytes();
  const { store } = tus();
  let removed = 0;
  for (const state of await allStates()) {
    if (runningPipeline(state.id) !== undefined) {
      // An upload the browser abandoned: its import waits for bytes that will not come.
      const touched = await stat(spoolFile(state.id)).then((s) => s.mtimeMs, () => state.updated);
      if (now - touched > transferRetentionMs()) await cancelPipeline(state.id);
      continue;
    }
    const ended = isEnded(state.status);
    if (now - state.updated < transferRetentionMs() && !(lowDisk && ended)) continue;
    await removeSpool(store, state.id);
    await removeState(state.id);
    removed++;
  }
  await store.deleteExpired().catch(() => 0);
  return removed;
}
