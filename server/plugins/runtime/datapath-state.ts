// Host-local state of a datapath plugin for one volume URI: opened (and how), which domains attached it.
// Activations are not here: they live on the SR (filesr activations) because they are exclusive across hosts.
// Records are small JSON files replaced atomically; a per-URI lock serialises concurrent calls.
import { closeSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync, fsyncSync } from "node:fs";
import { join } from "node:path";
import { dataDir } from "../../config.ts";
import { storageErrors } from "../../storage/errors.ts";
import { withLockFile } from "./lock-file.ts";

export interface DatapathRecord {
  uri: string;
  persistent: boolean;
  /** Domains that attached the volume and have not detached it. */
  domains: string[];
  /** Set by the plugin: e.g. the path it handed out, a daemon name. */
  extra: Record<string, string>;
}

export function datapathDir(scheme: string): string {
  return join(dataDir(), "datapath", scheme);
}

export function recordId(uri: string): string {
  // node:crypto loaded on use: the volume plugin imports this (for the names of a volume's daemon logs), and
  // loading it costs each of its calls milliseconds.
  return process.getBuiltinModule("node:crypto").createHash("sha256").update(uri).digest("hex").slice(0, 24);
}

function recordFile(scheme: string, uri: string): string {
  return join(datapathDir(scheme), `${recordId(uri)}.json`);
}

export function readRecord(scheme: string, uri: string): DatapathRecord | undefined {
  try {
    return JSON.parse(readFileSync(recordFile(scheme, uri), "utf8")) as DatapathRecord;
  } catch {
    return undefined;
  }
}

/** The record of an opened volume; a clear error when Datapath.open has not been called. */
export function requireRecord(scheme: string, uri: string): DatapathRecord {
  const record = readRecord(scheme, uri);
  if (record === undefined) throw storageErrors.backendFailure(`${uri} is not open: call Datapath.open first`);
  return record;
}

export function writeRecord(scheme: string, record: DatapathRecord): void {
  const file = recordFile(scheme, record.uri);
  mkdirSync(datapathDir(scheme), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    writeFileSync(fd, JSON.stringify(record));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

export function deleteRecord(scheme: string, uri: string): void {
  rmSync(recordFile(scheme, uri), { force: true });
}

export function listRecords(scheme: string): DatapathRecord[] {
  let names: string[];
  try {
    names = readdirSync(datapathDir(scheme)).filter((name) => name.endsWith(".json"));
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    try {
      return [JSON.parse(readFileSync(join(datapathDir(scheme), name), "utf8")) as DatapathRecord];
    } catch {
      return [];
    }
  });
}

/** Runs `body` holding the lock of this URI. */
export async function withUriLock<T>(scheme: string, uri: string, body: () => Promise<T>): Promise<T> {
  mkdirSync(datapathDir(scheme), { recursive: true });
  return withLockFile(`${recordFile(scheme, uri)}.lock`, body);
}
