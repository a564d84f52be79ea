// The user's uploads as the console sees them: the spool's bytes, the import's state and its task.
import { stat } from "node:fs/promises";
import { allStates, spoolFile } from "../../transfers/upload/state.ts";
import { type XenApiClient, zTaskRecord } from "../../toolstack/xenapi/client.ts";
import { describeTaskError } from "../xenapi-error.ts";
import type { UploadSummary } from "./schema.ts";

export async function listUploads(xapi: XenApiClient, user: string, ids?: readonly string[]): Promise<{ uploads: UploadSummary[] }> {
  const states = (await allStates()).filter((s) => s.user === user && (ids === undefined || ids.includes(s.id)));
  states.sort((a, b) => b.created - a.created);
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
      return { id: s.id, fileName: s.fileName, sr: s.sr, srName: s.srName, length: s.length, received, status: s.status, error: s.error, attempts: s.attempts, vms: s.vms, task, created: s.created, updated: s.updated, source: s.source, url: s.url };
    }),
  );
  return { uploads };
}
