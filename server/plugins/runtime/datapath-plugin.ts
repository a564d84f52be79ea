// The part of our datapath plugins that does not depend on how data is handed out: the open → attach →
// activate → deactivate → detach → close state machine with its idempotence rules, activation bookkeeping
// on the SR, the never-failing detach, Plugin.* answers. Each datapath supplies the hooks.
import { hostUuid } from "../../config.ts";
import type { PluginImplementation } from "../../storage/dispatcher.ts";
import type { Implementation } from "../../storage/types.ts";
import * as filesr from "../filesr/index.ts";
import { mapErrors } from "../filesr-errors.ts";
import { parseVolumeUri, srUri } from "../uris.ts";
import { type DatapathDescription, datapathQuery } from "./datapath-query.ts";
import { pendingCleanups, queueCleanup, retryCleanups } from "./cleanup-queue.ts";
import { type DatapathRecord, deleteRecord, listRecords, readRecord, requireRecord, withUriLock, writeRecord } from "./datapath-state.ts";

export interface VolumeRef {
  uri: string;
  srPath: string;
  key: string;
}

export interface DatapathHooks {
  /** Sets up access (idempotent: `record.extra` holds what an earlier attach set up) and describes it. */
  attach(volume: VolumeRef, record: DatapathRecord): Promise<Implementation[]>;
  /** Called after the activation is recorded on the SR. */
  activated?(volume: VolumeRef, record: DatapathRecord, mode: filesr.ActivationMode): Promise<void>;
  /** Called after an activation is cleared. */
  deactivated?(volume: VolumeRef, record: DatapathRecord): Promise<void>;
  /** Undoes attach once no domain is attached any more. May throw: the work is then queued and retried. */
  release(volume: VolumeRef, record: DatapathRecord): Promise<void>;
  /** Throws away what open set up (e.g. a non-persistent overlay). */
  close(volume: VolumeRef, record: DatapathRecord): Promise<void>;
}

export function createDatapathPlugin(
  info: DatapathDescription,
  hooks: DatapathHooks,
  extra: PluginImplementation = {},
): PluginImplementation {
  const { scheme } = info;
  const ref = (uri: string): VolumeRef => ({ uri, ...parseVolumeUri(uri, scheme) });

  const release = async (volume: VolumeRef, record: DatapathRecord) => {
    try {
      await hooks.release(volume, record);
    } catch (error) {
      queueCleanup(scheme, volume.uri, "release", error);
    }
  };

  // Work left by an earlier detach is retried first, by whichever call comes next.
  const retryQueued = () =>
    retryCleanups(scheme, async (task) => {
      const record = readRecord(scheme, task.uri);
      if (record !== undefined && record.domains.length === 0) await hooks.release(ref(task.uri), record);
    });

  const locked = <T>(uri: string, body: (volume: VolumeRef) => Promise<T>) =>
    withUriLock(scheme, uri, async () => {
      await retryQueued();
      return body(ref(uri));
    });

  const activate = (uri: string, domain: string, mode: filesr.ActivationMode) =>
    locked(uri, async (volume) => {
      const record = requireRecord(scheme, uri);
      if (!record.domains.includes(domain)) throw new Error(`${uri} is not attached for domain ${domain}: call Datapath.attach first`);
      await filesr.recordActivation(volume.srPath, volume.key, { host: hostUuid(), domain, mode });
      await hooks.activated?.(volume, record, mode);
      return null;
    });

  return mapErrors<PluginImplementation>({
    "Plugin.query": () => datapathQuery(info),
    "Plugin.ls": () => [...new Set(listRecords(scheme).map((r) => srUri(parseVolumeUri(r.uri, scheme).srPath)))].sort(),
    "Plugin.diagnostics": () => {
      const records = listRecords(scheme);
      const cleanups = pendingCleanups(scheme);
      return [
        `Hangar ${scheme} datapath ${info.version} on Node ${process.versions.node}, host ${hostUuid()}`,
        `${records.length} volume(s) open, ${records.filter((r) => r.domains.length > 0).length} attached, ` +
          `${records.filter((r) => !r.persistent).length} non-persistent`,
        `${cleanups.length} clean-up task(s) queued${cleanups.map((c) => `\n  ${c.action} after ${c.attempts} attempt(s): ${c.lastError}`).join("")}`,
      ].join("\n");
    },

    "Datapath.open": ({ uri, persistent }) =>
      locked(uri, async (volume) => {
        await filesr.statVolume(volume.srPath, volume.key);
        const existing = readRecord(scheme, uri);
        if (existing !== undefined && existing.persistent !== persistent) {
          throw new Error(`${uri} is already open with persistent=${existing.persistent}`);
        }
        if (existing === undefined) writeRecord(scheme, { uri, persistent, domains: [], extra: {} });
        return null;
      }),
    "Datapath.attach": ({ uri, domain }) =>
      locked(uri, async (volume) => {
        const record = requireRecord(scheme, uri);
        const implementations = await hooks.attach(volume, record);
        if (!record.domains.includes(domain)) record.domains.push(domain);
        writeRecord(scheme, record);
        return { implementations };
      }),
    "Datapath.activate": ({ uri, domain }) => activate(uri, domain, "rw"),
    ...(info.features.includes("VDI_ACTIVATE_READONLY")
      ? { "Datapath.activate_readonly": ({ uri, domain }: { uri: string; domain: string }) => activate(uri, domain, "ro") }
      : {}),
    "Datapath.deactivate": ({ uri, domain }) =>
      locked(uri, async (volume) => {
        await filesr.clearActivation(volume.srPath, volume.key, { host: hostUuid(), domain });
        const record = readRecord(scheme, uri);
        if (record !== undefined) await hooks.deactivated?.(volume, record);
        // Chains of an active volume are never merged: now they may be.
        filesr.startGarbageCollector(volume.srPath);
        return null;
      }),
    "Datapath.detach": async ({ uri, domain }) => {
      // Never fails: whatever cannot be undone now is queued and retried by later calls.
      try {
        await locked(uri, async (volume) => {
          const record = readRecord(scheme, uri);
          if (record === undefined) return;
          record.domains = record.domains.filter((d) => d !== domain);
          writeRecord(scheme, record);
          if (record.domains.length === 0) await release(volume, record);
        });
      } catch (error) {
        queueCleanup(scheme, uri, "release", error);
      }
      return null;
    },
    "Datapath.close": ({ uri }) =>
      locked(uri, async (volume) => {
        const record = readRecord(scheme, uri);
        if (record === undefined) return null;
        if (record.domains.length > 0) throw new Error(`${uri} is still attached by ${record.domains.join(", ")}: detach first`);
        await hooks.release(volume, record);
        await hooks.close(volume, record);
        deleteRecord(scheme, uri);
        return null;
      }),
    ...extra,
  });
}
