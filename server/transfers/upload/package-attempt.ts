// One import of an upload that is not an XVA (an OVA, or a bare disk image), start to end: the console itself
// reads the spool as it grows and imports it through XenAPI and each disk's `PUT /import_raw_vdi`
// (server/ova), in a task it made, which the toolstack shows and which the task page can cancel. What an
// earlier attempt made (marked with the upload's id) goes first. How it ended, as an XVA attempt's outcome.
import { Readable } from "node:stream";
import { z } from "zod";
import { HEADERLESS_DISK_NAME, PACKAGE_SNIFF_BYTES, type PackageKind, sniffPackage } from "../../../lib/file-kind.ts";
import { importDiskImage, importOva, PackageError, type PackageSource } from "../../ova/import.ts";
import { ImportCancelled, runInTask } from "../../ova/in-task.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { Attempt } from "./import-attempt.ts";
import { brokenReason, type Outcome } from "./outcome.ts";
import type { SpoolFollower } from "./spool-follower.ts";
import type { UploadState } from "./state.ts";

/** What the upload's first bytes say it is: an OVA or a disk image is imported here; anything else by /import. */
export async function uploadKind(state: UploadState, follower: SpoolFollower, signal: AbortSignal): Promise<PackageKind | undefined> {
  const chunks: Buffer[] = [];
  for await (const chunk of follower.stream(signal, 0, Math.min(PACKAGE_SNIFF_BYTES, state.length))) chunks.push(chunk);
  const kind = sniffPackage(Buffer.concat(chunks));
  if (kind === undefined && HEADERLESS_DISK_NAME.test(state.fileName)) return { kind: "disk", format: "raw" };
  return kind?.kind === "xva" ? undefined : kind;
}

/** An OVF alone cannot be imported: its disks are other files (the page packs an OVF dropped with them as an OVA). */
const OVF_ALONE = "is an OVF descriptor alone: drop it together with its disk files (or the folder holding them), or import the OVA";

/** One import: see the file's header. */
export async function packageAttempt(attempt: Attempt, kind: PackageKind): Promise<Outcome> {
  const { xapi, state, signal, follower } = attempt;
  if (kind.kind === "ovf") return { kind: "refused", error: `${state.fileName} ${OVF_ALONE}.` };
  const what = kind.kind === "ova" ? "VM import" : state.diskOnly ? "Disk import" : "VM import";
  const restarted = state.attempts > 0 ? ` (import restarted from the console's copy, attempt ${state.attempts + 1})` : "";
  const task = await xapi.call(z.string(), "task.create", `${what}: ${state.fileName}`, `Uploaded in the console and imported into ${state.srName} as it arrives${restarted}`);
  if (signal.aborted) {
    await xapi.call(z.unknown(), "task.cancel", task).catch(() => undefined);
    throw signal.reason;
  }
  await attempt.started(task);
  // The spool's readers end with the attempt: one waiting for bytes of a paused upload must not outlive it.
  const over = new AbortController();
  const reading = AbortSignal.any([signal, over.signal]);
  const source: PackageSource = {
    name: state.fileName,
    length: state.length,
    rereadable: true,
    open: (start, length) => Readable.from(follower.stream(reading, start, length === undefined ? state.length : start + length), { objectMode: false }),
  };
  try {
    const result = await runInTask(xapi, task, state.length, signal, (control) => {
      const target = { xapi, toolstack: attempt.toolstack, sr: state.sr, mark: `upload-${state.id}`, force: state.force, signal: control.signal, task, progress: control.progress };
      return kind.kind === "ova" ? importOva(target, source) : importDiskImage(target, source, { vm: !state.diskOnly });
    });
    return { kind: "done", vms: result.vm === null ? [] : [result.vm], vdis: result.vdis, notes: result.notes };
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    if (error instanceof PackageError) return { kind: "refused", error: error.message };
    if (error instanceof ImportCancelled) return { kind: "refused", error: "The import was cancelled." };
    // A call the toolstack refused (a VM it will not make) is the file's; an ended session or a lost connection is not.
    if (error instanceof XenApiError && error.code !== "SESSION_INVALID") return { kind: "refused", error: `${error.code}: ${error.params.join(" ")}` };
    return { kind: "broken", reason: brokenReason(error) };
  } finally {
    over.abort();
  }
}
