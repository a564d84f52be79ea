// Data.copy / Data.mirror operations as records on disk (<data dir>/datapath/nbd/operations/<id>.json,
// replaced atomically): the daemon running an operation writes them, any plugin call reads them, and they
// outlive both. A record still "running" whose worker is gone means the worker died: see Data.stat.
import { randomUUID } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import * as z from "zod/mini";
import type { Status } from "../../../storage/types.ts";
import { operationsDir } from "./paths.ts";

/** The remote URI without its password, for records and messages (the NBD client names remotes the same way). */
export { redactRemote } from "../../../nbd/client.ts";

const ZWorker = z.object({ machine: z.string(), bootId: z.string(), pid: z.number(), pidStart: z.string() });

const ZOperationRecord = z.object({
  id: z.string(),
  kind: z.enum(["copy", "mirror"]),
  /** The volume's datapath URI. */
  uri: z.string(),
  /** The remote URI with any password removed: records are not the place for credentials. */
  remote: z.string(),
  /** Name of the volume daemon that runs it, and that process. */
  daemon: z.string(),
  worker: ZWorker,
  state: z.enum(["running", "succeeded", "failed"]),
  /** Copies: bytes done and to do. */
  done: z.optional(z.number()),
  total: z.optional(z.number()),
  error: z.optional(z.string()),
  started: z.string(),
  updated: z.string(),
});

export type OperationRecord = z.infer<typeof ZOperationRecord>;

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function newOperationId(): string {
  return randomUUID();
}

/** Only ids we hand out name files: anything else is no operation of ours. */
export function isOperationId(id: string): boolean {
  return ID.test(id);
}

function recordFile(id: string): string {
  if (!isOperationId(id)) throw new Error(`${JSON.stringify(id)} is not an operation id of this plugin`);
  return join(operationsDir(), `${id}.json`);
}

let tmpCounter = 0;

/** Replaces the record atomically; `durable` also fsyncs it (final states; progress checkpoints need not). */
export function writeOperation(record: OperationRecord, options: { durable?: boolean } = {}): void {
  const file = recordFile(record.id);
  mkdirSync(operationsDir(), { recursive: true });
  const tmp = `${file}.${process.pid}.${tmpCounter++}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    writeSync(fd, JSON.stringify({ ...record, updated: new Date().toISOString() }));
    if (options.durable) fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

export function readOperation(id: string): OperationRecord | undefined {
  let text: string;
  try {
    text = readFileSync(recordFile(id), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  return ZOperationRecord.parse(JSON.parse(text));
}

export function listOperations(): OperationRecord[] {
  let names: string[];
  try {
    names = readdirSync(operationsDir()).filter((name) => name.endsWith(".json"));
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const record = readOperation(name.slice(0, -".json".length));
    return record === undefined ? [] : [record];
  });
}

export function deleteOperation(id: string): void {
  rmSync(recordFile(id), { force: true });
}

export function toStatus(record: OperationRecord): Status {
  const status: Status = { failed: record.state === "failed", complete: record.state !== "running" };
  if (record.kind === "copy") {
    const fraction = record.state === "succeeded" ? 1 : record.total ? (record.done ?? 0) / record.total : 0;
    status.progress = Math.min(1, Math.max(0, fraction));
  }
  return status;
}
