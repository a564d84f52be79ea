// The toolstack's tasks as the task page shows them, the running ones and one page of the finished ones
// (task.hangar_get_page: the toolstack reads only those): what each is (from the data-task state the toolstack
// keeps in other_config, else its name_label), its state, progress (live from the datapath's Data.stat for a
// data operation that runs), rate, time left, and the reason of a failure in words.
import "server-only";

import { z } from "zod";
import type { RegisteredPlugin } from "../../storage/registry.ts";
import { type XenApiClient, zInt64, zTaskRecord } from "../../xenapi/client.ts";
import { CONSOLE_DBG, hostPlugins, type PluginPlace, type PoolHost, poolHosts } from "../storage-access.ts";
import { describeTaskError } from "../../xenapi/error-descriptions.ts";
import { parseXenDate } from "../../xenapi/values.ts";
import type { TFinishedState, TListTasksInput, TListTasksResponse, TTask, TTaskKind, TTaskState } from "./schema.ts";
import { PART_OF_KEY } from "../../ova/import.ts";

/** other_config keys the toolstack writes on data tasks (server/toolstack/data-tasks.ts). */
const STATE_KEY = "hangar:data-operation";
const BYTES_KEY = "hangar:bytes";

/** No time left is shown for a task younger than this: its rate says nothing yet. */
const ETA_MIN_AGE_S = 10;
/** Data.stat of a running operation is asked for at most this long; the task's own progress is the fallback. */
const STAT_TIMEOUT_MS = 2_000;
/** Volume names and sizes change rarely; a page polling every second reuses them this long. */
const VOLUME_TTL_MS = 30_000;

export const ZTaskListRecord = zTaskRecord.extend({
  allowed_operations: z.array(z.string()).default([]),
  /** The host running it: a data operation's Data.stat is asked of that host's datapath plugin. */
  resident_on: z.string().default(""),
  other_config: z.record(z.string(), z.string()).default({}),
});
type TaskListRecord = z.infer<typeof ZTaskListRecord>;

const ZDataState = z.looseObject({
  what: z.enum(["vdi-copy", "data-copy", "data-mirror"]),
  vdi: z.string(),
  /** The volume's name and size as the task began (toolstacks before this kept none). */
  name: z.string().optional(),
  size: z.number().optional(),
  destination: z.object({ sr: z.string(), key: z.string() }).optional(),
  into: z.string().optional(),
  into_name: z.string().optional(),
  operation: z.object({ uri: z.string(), id: z.tuple([z.enum(["CopyV1", "MirrorV1"]), z.string()]) }).optional(),
});
type DataState = z.infer<typeof ZDataState>;

const ZVdiBrief = z.looseObject({ name_label: z.string(), virtual_size: zInt64 });
interface VolumeBrief {
  name: string;
  size?: number;
}
const volumes = new Map<string, { at: number; brief: Promise<VolumeBrief | undefined> }>();

/** A VDI's name and size, cached; undefined when it is gone (a finished copy's source may be). */
function volumeBrief(xapi: XenApiClient, ref: string): Promise<VolumeBrief | undefined> {
  const cached = volumes.get(ref);
  if (cached !== undefined && Date.now() - cached.at < VOLUME_TTL_MS) return cached.brief;
  const brief = xapi.call(ZVdiBrief, "VDI.get_record", ref).then(
    (vdi) => ({ name: vdi.name_label, size: vdi.virtual_size }),
    () => undefined,
  );
  if (volumes.size > 1000) volumes.clear();
  volumes.set(ref, { at: Date.now(), brief });
  return brief;
}

const STATES: Record<TaskListRecord["status"], TTaskState> = {
  pending: "running",
  cancelling: "cancelling",
  success: "succeeded",
  failure: "failed",
  cancelled: "cancelled",
};

const KIND_LABELS: Record<TTaskKind, string> = {
  import: "Import",
  export: "Export",
  sr: "SR operation",
  volume: "Volume operation",
  vm: "VM operation",
  "vdi-copy": "Volume copy (Data.copy)",
  "data-copy": "Data.copy",
  "data-mirror": "Data.mirror",
  other: "Task",
};

function dataState(record: TaskListRecord): DataState | undefined {
  const text = record.other_config[STATE_KEY];
  if (text === undefined) return undefined;
  try {
    const parsed = ZDataState.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** The task's kind: a data task's state says it; else the call its name_label names. */
export function classify(name: string, state: DataState | undefined): TTaskKind {
  if (state !== undefined) return state.what;
  const call = name.replace(/^Async\./, "");
  if (call === "VDI.copy") return "vdi-copy";
  if (call === "VDI.hangar_data_copy") return "data-copy";
  if (call === "VDI.hangar_data_mirror" || call === "VDI.hangar_data_mirror_to_vdi") return "data-mirror";
  if (/import/i.test(call)) return "import";
  if (/export/i.test(call)) return "export";
  if (/^(SR|PBD)\./.test(call)) return "sr";
  if (/^VDI\./.test(call)) return "volume";
  if (/^(VM|VBD|VIF)\./.test(call)) return "vm";
  return "other";
}

/** A call name for people: "Async.VDI.snapshot" → "VDI.snapshot". */
function callName(name: string): string {
  return name.replace(/^Async\./, "");
}

function titleFor(kind: TTaskKind, record: TaskListRecord, volume: VolumeBrief | undefined, into: VolumeBrief | undefined | null): string {
  const what = volume === undefined ? "a volume" : `volume “${volume.name}”`;
  if (into !== null) return `Mirror of ${what} into ${into === undefined ? "another volume" : `volume “${into.name}”`}`;
  switch (kind) {
    case "vdi-copy":
      return `Copy of ${what} to another SR`;
    case "data-copy":
      return `Copy of ${what} to an NBD export`;
    case "data-mirror":
      return `Mirror of ${what} to an NBD export`;
    default:
      return record.name_description.trim() === "" ? callName(record.name_label) : `${callName(record.name_label)}: ${record.name_description}`;
  }
}

/** Live progress of a running data operation from its datapath (on the task's host); undefined when it cannot be had quickly. */
async function liveProgress(place: PluginPlace, operation: NonNullable<DataState["operation"]>): Promise<number | undefined> {
  const scheme = operation.uri.split(":", 1)[0] ?? "";
  let plugin: RegisteredPlugin | undefined;
  try {
    plugin = (await place.registry()).find(scheme, "datapath");
  } catch {
    return undefined;
  }
  if (plugin === undefined) return undefined;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), STAT_TIMEOUT_MS)));
  try {
    const status = await Promise.race([plugin.client.call("Data.stat", { dbg: CONSOLE_DBG, operation: operation.id }), deadline]);
    return status?.progress;
  } catch {
    // The task finished and forgot its operation between the listing and this call.
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** A failure's words without any stack trace a plugin may have put in its message. */
export function withoutStackTrace(text: string): string {
  const lines = text.split("\n");
  const trace = lines.findIndex((line) => /^\s+at \S/.test(line) || /^\s*Traceback \(most recent call last\)/.test(line));
  return (trace < 0 ? lines : lines.slice(0, trace)).join(" ").replace(/\s+/g, " ").trim();
}

/**
 * The volumes a data task reads and writes into, from its state (the toolstack names them as the task begins);
 * asked of the toolstack (VDI.get_record: an SR listing) only for a running task whose state names none. `into`
 * null: the task writes no volume of ours (a copy or mirror to an NBD URI, anything else).
 */
async function volumesOf(xapi: XenApiClient, record: TaskListRecord, state: DataState | undefined, running: boolean) {
  const known = (ref: string, name: string | undefined, size?: number): Promise<VolumeBrief | undefined> =>
    name !== undefined ? Promise.resolve({ name, size }) : running ? volumeBrief(xapi, ref) : Promise.resolve(undefined);
  const volume = state === undefined ? undefined : await known(state.vdi, state.name, state.size);
  const into =
    state?.into === undefined ? (callName(record.name_label) === "VDI.hangar_data_mirror_to_vdi" ? undefined : null) : await known(state.into, state.into_name);
  return { volume, into };
}

/** One task as the page shows it; `now` in milliseconds; `hosts` the pool's (poolHosts()). A finished task needs no call. */
export async function describeTask(xapi: XenApiClient, pluginRoot: string, ref: string, record: TaskListRecord, now: number, hosts: ReadonlyMap<string, PoolHost> = new Map()): Promise<TTask> {
  const state = dataState(record);
  const kind = classify(record.name_label, state);
  const taskState = STATES[record.status];
  const running = taskState === "running" || taskState === "cancelling";
  const { volume, into } = await volumesOf(xapi, record, state, running);

  let progress = Math.min(1, Math.max(0, record.progress));
  // A mirror's progress means nothing to show (it runs until cancelled): no plugin call for it.
  if (running && state?.operation !== undefined && kind !== "data-mirror") {
    const host = hosts.get(record.resident_on);
    // An offline host's task is failed by the pool soon: its own progress stands until then.
    const live = host?.live === false ? undefined : await liveProgress(hostPlugins(xapi, pluginRoot, host), state.operation);
    if (live !== undefined) progress = Math.max(progress, Math.min(1, live));
  }

  const created = parseXenDate(record.created) ?? now;
  const finished = running ? undefined : parseXenDate(record.finished);
  const end = finished ?? now;
  const durationS = Math.max(0, (end - created) / 1000);

  const recorded = Number(record.other_config[BYTES_KEY]);
  const size = Number.isFinite(recorded) && recorded > 0 ? recorded : volume?.size;
  // A mirror moves whatever is written while it runs: neither a total nor a rate of the volume means anything.
  const copies = kind === "vdi-copy" || kind === "data-copy";
  const totalBytes = copies && size !== undefined ? size : null;
  const rateBytesPerS = totalBytes !== null && durationS > 0 && progress > 0 && taskState !== "failed" ? (totalBytes * progress) / durationS : null;
  const etaS =
    running && kind !== "data-mirror" && progress > 0 && progress < 1 && durationS >= ETA_MIN_AGE_S ? Math.max(0, durationS / progress - durationS) : null;

  const failed = taskState === "failed";
  return {
    ref,
    uuid: record.uuid,
    name: record.name_label,
    title: titleFor(kind, record, volume, into),
    kind,
    kindLabel: KIND_LABELS[kind],
    state: taskState,
    progress,
    created: new Date(created).toISOString(),
    finished: finished === undefined ? null : new Date(finished).toISOString(),
    durationS,
    totalBytes,
    rateBytesPerS,
    etaS,
    error: failed ? withoutStackTrace(describeTaskError(record.error_info)) || "The task failed without saying why." : null,
    errorCode: failed ? (record.error_info[0] ?? null) : null,
    canCancel: record.status === "pending" && record.allowed_operations.includes("cancel"),
    canDestroy: !running,
  };
}

const ZTaskEntry = z.object({ ref: z.string(), record: ZTaskListRecord });
const ZTaskPage = z.object({ running: z.array(ZTaskEntry), finished: z.array(ZTaskEntry), total_running: zInt64, total_finished: zInt64 });
type TaskEntry = z.infer<typeof ZTaskEntry>;

const TOOLSTACK_STATUS: Record<TFinishedState, string> = { succeeded: "success", failed: "failure", cancelled: "cancelled" };

/** The running tasks (newest first) and one page of the finished ones (last finished first), as asked. */
export async function listTasks(xapi: XenApiClient, pluginRoot: string, query?: TListTasksInput): Promise<TListTasksResponse> {
  const now = Date.now();
  const page = await xapi.call(ZTaskPage, "task.hangar_get_page", {
    ...(query?.status === undefined ? {} : { status: TOOLSTACK_STATUS[query.status] }),
    ...(query?.text ? { text: query.text } : {}),
    offset: query?.offset ?? 0,
    limit: query?.limit ?? 100,
  });
  // A part of another task (a disk of an OVA import: server/ova) shows as that task, not beside it.
  const shown = (entries: TaskEntry[]) => entries.filter(({ record }) => record.other_config[PART_OF_KEY] === undefined);
  // The hosts matter only to a running data operation: its Data.stat is asked of its host's datapath.
  const hosts = page.running.length === 0 ? new Map<string, PoolHost>() : await poolHosts(xapi);
  const describe = (entries: TaskEntry[]) => Promise.all(shown(entries).map(({ ref, record }) => describeTask(xapi, pluginRoot, ref, record, now, hosts)));
  const [running, finished] = await Promise.all([describe(page.running), describe(page.finished)]);
  return { running, finished, totalRunning: page.total_running, totalFinished: page.total_finished, now: new Date(now).toISOString() };
}

/** task.cancel; the toolstack refuses one that is not pending (OPERATION_NOT_ALLOWED, in words). */
export async function cancelTask(xapi: XenApiClient, ref: string): Promise<void> {
  await xapi.call(z.unknown(), "task.cancel", ref);
}

/** task.destroy of a finished task: it leaves the history. */
export async function destroyTask(xapi: XenApiClient, ref: string): Promise<void> {
  await xapi.call(z.unknown(), "task.destroy", ref);
}
