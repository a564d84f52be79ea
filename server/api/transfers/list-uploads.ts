// The user's uploads as the console sees them: the spool's bytes, the import's state and its task.
import "server-only";

import { stat } from "node:fs/promises";
import { type ConsoleSession, isSessionValid } from "../../auth/session.ts";
import { runningPipeline } from "../../transfers/upload/pipeline.ts";
import { allStates, spoolFile } from "../../transfers/upload/state.ts";
import { type XenApiClient, zTaskRecord } from "../../xenapi/client.ts";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import type { UploadSummary } from "./schema.ts";

export async function listUploads(xapi: XenApiClient, session: ConsoleSession, ids?: readonly string[]): Promise<{ uploads: UploadSummary[] }> {
  const states = (await allStates()).filter((s) => s.user === session.user && (ids === undefined || ids.includes(s.id)));
  states.sort((a, b) => b.created - a.created);
  // An import whose session ended (logged out elsewhere) goes on in this one: the user is back.
  const waiting = states.map((s) => runningPipeline(s.id)).filter((p) => p?.waitsForSession === true);
  if (waiting.length > 0 && (await isSessionValid(session))) for (const pipeline of waiting) await pipeline!.adoptSession(session.session);
  const uploads = await Promise.all(
    states.map(async (s): Promise<UploadSummary> => {
      const received = s.status === "done" ? s.length : await stat(spoolFile(s.id)).then((st) => st.size, () => 0);
      const task =
        s.task === null
          ? null
          : await xapi.call(zTaskRecord, "task.get_record", s.task).then(
              (t) => ({ ref: s.task!, status: t.status, progress: t.progress, error: t.error_info.length === 0 ? null : describeTaskError(t.error_info) }),
              () => null,
            );
      return { id: s.id, fileName: s.fileName, sr: s.sr, srName: s.srName, length: s.length, received, status: s.status, error: s.error, attempts: s.attempts, vms: s.vms, task, created: s.created, updated: s.updated, source: s.source, url: s.url, vdis: s.vdis, notes: s.notes, diskOnly: s.diskOnly };
    }),
  );
  return { uploads };
}
