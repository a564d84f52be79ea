// What the tasks router accepts and returns: toolstack tasks as people read them (kind, state, progress,
// rate, time left, the reason of a failure in words), and the start of a copy or mirror of a volume.
import { z } from "zod";
import { parseNbdUri } from "../../nbd/uri.ts";

export const ZTaskKind = z.enum(["import", "export", "sr", "volume", "vm", "vdi-copy", "data-copy", "data-mirror", "other"]);
export type TTaskKind = z.infer<typeof ZTaskKind>;

export const ZTaskState = z.enum(["running", "cancelling", "succeeded", "failed", "cancelled"]);
export type TTaskState = z.infer<typeof ZTaskState>;

export const ZTask = z.object({
  ref: z.string(),
  uuid: z.string(),
  /** The toolstack's name_label, e.g. "Async.VDI.copy". */
  name: z.string(),
  /** What the task does, in words ("Copy of volume “db” to an NBD export"). */
  title: z.string(),
  kind: ZTaskKind,
  /** The kind in words, e.g. "Data.mirror". */
  kindLabel: z.string(),
  state: ZTaskState,
  /** 0–1. */
  progress: z.number().min(0).max(1),
  /** ISO 8601. */
  created: z.string(),
  /** ISO 8601; null while the task runs. */
  finished: z.string().nullable(),
  /** Seconds from created to finished (or to now while it runs). */
  durationS: z.number().nonnegative(),
  /** Bytes a data operation moves in all; null when unknown or meaningless (a mirror). */
  totalBytes: z.number().nullable(),
  /** Bytes per second, over the task's life so far; null where it means nothing. */
  rateBytesPerS: z.number().nullable(),
  /** Seconds left (elapsed / progress − elapsed); null while progress is 0, the task is young or it never ends. */
  etaS: z.number().nullable(),
  /** Why it failed, in words; null unless failed. */
  error: z.string().nullable(),
  /** The XenAPI code of the failure, for tests and icons. */
  errorCode: z.string().nullable(),
  canCancel: z.boolean(),
  /** Finished tasks can be removed from the history. */
  canDestroy: z.boolean(),
});
export type TTask = z.infer<typeof ZTask>;

/** The finished states the history filters by (the toolstack's success, failure, cancelled). */
export const ZFinishedState = z.enum(["succeeded", "failed", "cancelled"]);
export type TFinishedState = z.infer<typeof ZFinishedState>;

/** The most finished tasks one listing answers. */
export const TASK_LIST_MAX = 500;

/** Which finished tasks to list with the running ones: a page of them, filtered. Without it, the first 100. */
export const ZListTasksSchema = z
  .object({
    status: ZFinishedState.optional(),
    /** Contained in the task's call name or description (a data task's names its volumes), case aside. */
    text: z.string().trim().max(200).optional(),
    offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
    limit: z.number().int().min(0).max(TASK_LIST_MAX).default(100),
  })
  .optional();
export type TListTasksInput = z.infer<typeof ZListTasksSchema>;

export const ZListTasksResponse = z.object({
  /** Running and cancelling tasks, newest first. */
  running: z.array(ZTask),
  /** One page of the finished tasks that match, most recently finished first. */
  finished: z.array(ZTask),
  totalRunning: z.number().int().nonnegative(),
  /** Finished tasks that match, in all (the page's list says which of them it holds). */
  totalFinished: z.number().int().nonnegative(),
  /** Server time of the listing, ISO 8601 (the page compares ages against it). */
  now: z.string(),
});
export type TListTasksResponse = z.infer<typeof ZListTasksResponse>;

export const ZTaskRefSchema = z.object({ ref: z.string().regex(/^OpaqueRef:[\w-]+$/, "Not a task reference") });

/** An NBD URI the toolstack's datapaths can write to, checked with the toolstack's own parser. */
export const ZNbdUri = z
  .string()
  .trim()
  .min(1, "Give an NBD URI: nbd://host:port/export, nbd+unix:///export?socket=/path or nbd:unix:/path")
  .superRefine((uri, ctx) => {
    if (uri === "") return;
    try {
      parseNbdUri(uri);
    } catch (error) {
      // The parser's reason without the URI echoed back ("not an NBD URI: http://…" → "Not an NBD URI").
      const reason = (error instanceof Error ? error.message : String(error)).replace(/: \S*$/, "");
      const sentence = reason.startsWith("nbd") ? reason : `${reason.charAt(0).toUpperCase()}${reason.slice(1)}`;
      ctx.addIssue({ code: "custom", message: `${sentence}.` });
    }
  });

export const ZStartDataTaskSchema = z.discriminatedUnion("target", [
  z.object({
    target: z.literal("nbd"),
    vdi: z.string().min(1),
    operation: z.enum(["copy", "mirror"]),
    remote: ZNbdUri,
  }),
  /** VDI.copy: a new volume in the SR. */
  z.object({
    target: z.literal("sr"),
    vdi: z.string().min(1),
    operation: z.literal("copy"),
    sr: z.string().min(1),
  }),
  /** VDI.hangar_data_mirror_to_vdi: writes mirrored into an existing volume (of another SR). */
  z.object({
    target: z.literal("vdi"),
    vdi: z.string().min(1),
    operation: z.literal("mirror"),
    dest: z.string().min(1),
  }),
]);
export type TStartDataTaskInput = z.infer<typeof ZStartDataTaskSchema>;

export const ZStartDataTaskResponse = z.object({ task: z.string() });

/** SRs and their volumes, for the copy dialog's choices. */
export const ZCopySourcesResponse = z.object({
  srs: z.array(
    z.object({
      ref: z.string(),
      name: z.string(),
      type: z.string(),
      /** The pool's default SR (the dialog starts there). */
      isDefault: z.boolean(),
      /** Why its volumes could not be listed (detached, plugin failing); null when they could. */
      problem: z.string().nullable(),
      volumes: z.array(z.object({ ref: z.string(), name: z.string(), virtualSize: z.number(), isSnapshot: z.boolean() })),
    }),
  ),
});
export type TCopySourcesResponse = z.infer<typeof ZCopySourcesResponse>;
