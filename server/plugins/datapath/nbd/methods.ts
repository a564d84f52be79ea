// The `nbd` datapath: each attached volume is served over NBD on a unix socket by a daemon of its own
// (daemon.ts), which also runs the volume's Data.copy and Data.mirror operations.
import { rmSync } from "node:fs";
import { hostUuid } from "../../../config.ts";
import { formatXapiNbdUri, parseNbdUri } from "../../../nbd/uri.ts";
import type { PluginImplementation } from "../../../storage/dispatcher.ts";
import { storageErrors } from "../../../storage/errors.ts";
import type { Operation } from "../../../storage/types.ts";
import * as filesr from "../../filesr/index.ts";
import { toStorageError } from "../../filesr-errors.ts";
import { INFO } from "./query.ts";
import { createDatapathPlugin, type DatapathHooks, type VolumeRef } from "../../runtime/datapath-plugin.ts";
import { type DatapathRecord, requireRecord, withUriLock } from "../../runtime/datapath-state.ts";
import { parseVolumeUri } from "../../uris.ts";
import { findVolumeDaemon, send, sendIfRunning, sendStarting, stopVolumeDaemon } from "./daemon-client.ts";
import {
  deleteOperation,
  isOperationId,
  listOperations,
  newOperationId,
  type OperationRecord,
  readOperation,
  toStatus,
  writeOperation,
} from "./operations.ts";
import { exportSocket, importSocket } from "./paths.ts";
import type { Mode } from "./volume-export.ts";
import { workerAlive } from "./worker.ts";

const SCHEME = "nbd";

/** How the volume is activated on this host, as the SR records it (the daemon follows this). */
async function hostMode(volume: VolumeRef): Promise<Mode> {
  const mine = (await filesr.listActivations(volume.srPath, volume.key)).filter((a) => a.host === hostUuid());
  return mine.some((a) => a.mode === "rw") ? "rw" : mine.length > 0 ? "ro" : "none";
}

/** Brings the volume's daemon (started if needed) in line with the datapath state; answers the export socket. */
async function serve(volume: VolumeRef, record: DatapathRecord): Promise<string> {
  const { socket } = await sendStarting(volume.uri, "attach", { persistent: record.persistent, mode: await hostMode(volume) });
  return socket;
}

/** A daemon that could not take the mode of a just recorded activation: the activation is undone. */
class ModeRefused extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** Socket files of a daemon that died without removing them. */
function removeSockets(uri: string): void {
  rmSync(exportSocket(uri), { force: true });
  rmSync(importSocket(uri), { force: true });
}

const hooks: DatapathHooks = {
  async attach(volume, record) {
    importSocket(volume.uri); // refuses a run dir too long for unix sockets before anything starts
    const socket = await serve(volume, record);
    return [["Nbd", { uri: formatXapiNbdUri(socket, volume.key) }]];
  },
  async activated(volume, record) {
    try {
      await serve(volume, record);
    } catch (error) {
      throw new ModeRefused(error);
    }
  },
  async deactivated(volume) {
    await sendIfRunning(volume.uri, "mode", { mode: await hostMode(volume) });
  },
  async release(volume) {
    // The daemon stops serving at once; it stays while copies run and stops itself after them.
    const answer = await sendIfRunning(volume.uri, "release", {});
    if (answer !== undefined && !answer.stop) return;
    await stopVolumeDaemon(volume.uri);
    removeSockets(volume.uri);
  },
  async close(volume, record) {
    // A non-persistent volume's daemon holds the overlay with its writes: stopping it throws them away.
    if (!record.persistent) await stopVolumeDaemon(volume.uri);
    if ((await findVolumeDaemon(volume.uri)) === undefined) removeSockets(volume.uri);
  },
};

const datapath = createDatapathPlugin(
  INFO,
  hooks,
  {
    "Datapath.import_activate": ({ uri, domain }) =>
      withUriLock(SCHEME, uri, async () => {
        const record = requireRecord(SCHEME, uri);
        const volume = { uri, ...parseVolumeUri(uri, SCHEME) };
        const activations = await filesr.listActivations(volume.srPath, volume.key);
        if (!record.domains.includes(domain) || !activations.some((a) => a.host === hostUuid() && a.domain === domain)) {
          throw storageErrors.backendFailure(`${uri} is not activated for domain ${domain}: call Datapath.attach and Datapath.activate first`);
        }
        await serve(volume, record);
        return (await sendStarting(uri, "import", {})).socket;
      }),

    "Data.copy": async ({ uri, remote, blocklist }) => {
      await requireVolume(uri);
      checkRemote(remote);
      const id = newOperationId();
      await sendStarting(uri, "copy", { id, remote, blocklist });
      return ["CopyV1", id];
    },
    "Data.mirror": async ({ uri, remote }) => {
      await requireVolume(uri);
      checkRemote(remote);
      const id = newOperationId();
      const started = await sendIfRunning(uri, "mirror", { id, remote });
      if (started === undefined) throw storageErrors.backendFailure(`${uri} is not attached: only writes through an attached datapath can be mirrored`);
      return ["MirrorV1", id];
    },
    "Data.stat": async ({ operation }) => toStatus(await settle(requireOperation(operation))),
    "Data.cancel": async ({ operation }) => {
      const record = await settle(requireOperation(operation));
      if (record.state !== "running") return null;
      const daemon = await findVolumeDaemon(record.uri);
      // A worker that is alive but not answering is stopping: it ends the operation itself.
      if (daemon !== undefined && daemon.pid === record.worker.pid) await send(daemon, "cancel", { id: record.id });
      return null;
    },
    "Data.destroy": async ({ operation }) => {
      const id = operation[1];
      if (!isOperationId(id) || readOperation(id) === undefined) return null; // already forgotten
      const record = await settle(requireOperation(operation));
      if (record.state === "running") {
        throw storageErrors.backendFailure(`operation ${id} is still in progress: Data.cancel it and wait until Data.stat reports it complete`);
      }
      deleteOperation(id);
      return null;
    },
    "Data.ls": () => listOperations().map((record): Operation => [record.kind === "copy" ? "CopyV1" : "MirrorV1", record.id]),
  },
);

async function requireVolume(uri: string): Promise<void> {
  const { srPath, key } = parseVolumeUri(uri, SCHEME);
  await filesr.statVolume(srPath, key);
}

function checkRemote(remote: string): void {
  try {
    parseNbdUri(remote);
  } catch (error) {
    throw storageErrors.backendFailure(`remote: ${(error as Error).message}`);
  }
}

function requireOperation(operation: Operation): OperationRecord {
  const id = operation[1];
  const record = isOperationId(id) ? readOperation(id) : undefined;
  if (record === undefined) throw storageErrors.backendFailure(`no operation ${JSON.stringify(id)} (never started, or destroyed)`);
  return record;
}

/** Whether the worker of a running operation is gone: dead, or alive but no longer running it. */
async function workerGone(record: OperationRecord): Promise<boolean> {
  if (!workerAlive(record.worker)) return true;
  const daemon = await findVolumeDaemon(record.uri);
  if (daemon === undefined || daemon.pid !== record.worker.pid) return false; // alive but stopping: it will write the end
  try {
    return !(await send(daemon, "running", { id: record.id })).running;
  } catch {
    return false;
  }
}

/** The record, marked failed first when its worker died before finishing it (never reported a success). */
async function settle(record: OperationRecord): Promise<OperationRecord> {
  if (record.state !== "running" || !(await workerGone(record))) return record;
  // It may have finished between the two reads: only a record still running is the dead worker's.
  const again = readOperation(record.id);
  if (again === undefined || again.state !== "running") return again ?? record;
  const failed: OperationRecord = { ...again, state: "failed", error: `its worker (pid ${again.worker.pid}) ended before it finished` };
  writeOperation(failed, { durable: true });
  return failed;
}

/** An activation whose mode the daemon could not take is taken back, so it blocks no other host. */
function undoingRefusedActivation(call: PluginImplementation["Datapath.activate"]): PluginImplementation["Datapath.activate"] {
  return async (params) => {
    try {
      return await call!(params);
    } catch (error) {
      if (!(error instanceof ModeRefused)) throw error;
      const { srPath, key } = parseVolumeUri(params.uri, SCHEME);
      await withUriLock(SCHEME, params.uri, () => filesr.clearActivation(srPath, key, { host: hostUuid(), domain: params.domain }));
      throw toStorageError(error.cause);
    }
  };
}

/** Failed operations whose reasons diagnostics show: Data.stat has no field for a reason. */
const FAILURES_SHOWN = 10;

/**
 * The datapath's diagnostics, how many data operations are in which state, and why the latest failed ones
 * failed (no volume URIs: they name paths; remotes are shown without passwords).
 */
async function diagnostics(params: { dbg: string }): Promise<string> {
  const counts = new Map<string, number>();
  const records = listOperations();
  for (const { kind, state } of records) counts.set(`${kind} ${state}`, (counts.get(`${kind} ${state}`) ?? 0) + 1);
  const operations = [...counts].map(([what, count]) => `${count} ${what}`).join(", ");
  const failures = records
    .filter((record) => record.state === "failed")
    .sort((a, b) => b.updated.localeCompare(a.updated))
    .slice(0, FAILURES_SHOWN)
    .map((record) => `\n  ${record.kind} ${record.id} failed at ${record.updated}: ${record.error ?? "no reason recorded"}`);
  return `${await datapath["Plugin.diagnostics"]!(params)}\ndata operations: ${operations || "none"}${failures.join("")}`;
}

export const methods: PluginImplementation = {
  ...datapath,
  "Plugin.diagnostics": diagnostics,
  "Datapath.activate": undoingRefusedActivation(datapath["Datapath.activate"]),
  "Datapath.activate_readonly": undoingRefusedActivation(datapath["Datapath.activate_readonly"]),
};

