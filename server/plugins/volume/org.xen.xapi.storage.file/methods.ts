// The methods of the `file` volume plugin but Plugin.query (plugin.ts): loaded only by the calls that need them.
import { existsSync } from "node:fs";
import { hostUuid, metricsDir } from "../../../config.ts";
import type { PluginImplementation } from "../../../storage/dispatcher.ts";
import { storageErrors } from "../../../storage/errors.ts";
import type { ProbeResult, SrStat, Volume } from "../../../storage/types.ts";
import * as filesr from "../../filesr/index.ts";
import { mapErrors } from "../../filesr-errors.ts";
import { daemonName } from "../../datapath/nbd/paths.ts";
import { removeDaemonLogs } from "../../runtime/daemon-log.ts";
import { DATAPATH_SCHEMES, srPathOf, srUri, volumeUri } from "../../uris.ts";
import { forgetAttached, listAttached, rememberAttached } from "./attached-srs.ts";
import { VERSION } from "./query.ts";

/** The SR directory from a configuration: key `path`, or a file:// `uri`. */
function configuredPath(configuration: Record<string, string>): string {
  const given = configuration.path ?? configuration.uri;
  if (given === undefined || given === "") {
    throw storageErrors.backendFailure('configuration needs "path" (a directory) or "uri" (file:///directory)');
  }
  return srPathOf(given);
}

/** The library's record with the datapath URIs added (in place: SR.ls turns thousands of them). */
function toWireVolume(srPath: string, volume: filesr.Volume): Volume {
  const wire = volume as Volume;
  wire.uri = DATAPATH_SCHEMES.map((scheme) => volumeUri(scheme, srPath, volume.key));
  return wire;
}

function toWireStat(stat: filesr.SrStat): SrStat {
  return {
    sr: srUri(stat.path),
    name: stat.name,
    uuid: stat.uuid,
    description: stat.description,
    free_space: stat.free_space,
    total_space: stat.total_space,
    datasources: stat.datasources,
    clustered: false,
    health: stat.health,
  };
}

async function diagnostics(): Promise<string> {
  const lines = [`Hangar file volume plugin ${VERSION} on Node ${process.versions.node}`, `host ${hostUuid()}`];
  const attached = listAttached();
  lines.push(`${attached.length} SR(s) attached on this host`);
  for (const sr of attached) {
    try {
      const path = srPathOf(sr);
      const [stat, volumes] = await Promise.all([filesr.statSr(path), filesr.listVolumes(path)]);
      const used = volumes.reduce((sum, v) => sum + v.physical_utilisation, 0);
      const virtual = volumes.reduce((sum, v) => sum + v.virtual_size, 0);
      // Uuids and numbers only: names, descriptions and paths may carry personal data.
      lines.push(
        `SR ${stat.uuid}: health ${stat.health[0]}${stat.health[1] ? ` (${stat.health[1]})` : ""}, ` +
          `${volumes.length} volumes, ${virtual} bytes virtual, ${used} bytes allocated, ` +
          `${stat.free_space} of ${stat.total_space} bytes free`,
      );
    } catch (error) {
      lines.push(`SR (unreadable): ${(error as Error).message.replace(/\/\S+/g, "<path>")}`);
    }
  }
  return lines.join("\n");
}

/** Runs a change that may leave layers to free or merge, then lets the background collector keep chains short. */
async function collectingGarbage(sr: string, change: (path: string) => Promise<void>): Promise<null> {
  const path = srPathOf(sr);
  await change(path);
  filesr.startGarbageCollector(path);
  return null;
}

async function probe(configuration: Record<string, string>): Promise<ProbeResult[]> {
  if (configuration.path === undefined && configuration.uri === undefined) {
    return [{ configuration, complete: false, extra_info: { hint: "set path to a directory to look for SRs in" } }];
  }
  const path = configuredPath(configuration);
  const { srs, creatable } = await filesr.probeSrs(path);
  const found: ProbeResult[] = srs.map((stat) => ({
    configuration: { path: stat.path, uuid: stat.uuid },
    complete: true,
    sr: toWireStat(stat),
    extra_info: {},
  }));
  if (creatable) found.push({ configuration: { path }, complete: true, extra_info: { creatable: "true" } });
  if (found.length === 0) {
    found.push({ configuration: { path }, complete: false, extra_info: { reason: "holds files that are not a Hangar SR" } });
  }
  return found;
}

export const methods: PluginImplementation = mapErrors<PluginImplementation>({
  "Plugin.ls": () => listAttached(),
  "Plugin.diagnostics": () => diagnostics(),

  "SR.probe": ({ configuration }) => probe(configuration),
  "SR.create": async ({ uuid, configuration, name, description }) => {
    const path = configuredPath(configuration);
    const sr = await filesr.createSr(path, { uuid, name, description });
    return { ...configuration, path: sr.path, sr_uuid: sr.uuid };
  },
  "SR.attach": async ({ configuration }) => {
    const path = configuredPath(configuration);
    const sr = await filesr.attachSr(path);
    const uri = srUri(sr.path);
    rememberAttached(sr.uuid, uri);
    filesr.startDatasourceDaemon(sr.path, metricsDir());
    return uri;
  },
  "SR.detach": async ({ sr }) => {
    const path = srPathOf(sr);
    if (!existsSync(path)) return null;
    const info = await filesr.openSr(path);
    await filesr.detachSr(path);
    forgetAttached(info.uuid);
    return null;
  },
  "SR.destroy": async ({ sr }) => {
    const path = srPathOf(sr);
    const info = await filesr.openSr(path);
    await filesr.destroySr(path);
    forgetAttached(info.uuid);
    return null;
  },
  "SR.stat": async ({ sr }) => {
    const path = srPathOf(sr);
    // As real plugins do (nfs-ng): a detached SR answers nothing but attach, probe and destroy's error.
    if (!(await filesr.openSr(path)).attached) throw storageErrors.srNotAttached(sr);
    return toWireStat(await filesr.statSr(path));
  },
  "SR.set_name": async ({ sr, new_name }) => (await filesr.setSrName(srPathOf(sr), new_name), null),
  "SR.set_description": async ({ sr, new_description }) => (await filesr.setSrDescription(srPathOf(sr), new_description), null),
  "SR.ls": async ({ sr }) => {
    const path = srPathOf(sr);
    return (await filesr.listVolumes(path)).map((v) => toWireVolume(path, v));
  },

  "Volume.create": async ({ sr, name, description, size, sharable }) => {
    const path = srPathOf(sr);
    return toWireVolume(path, await filesr.createVolume(path, { name, description, size, sharable }));
  },
  "Volume.snapshot": async ({ sr, key }) => {
    const path = srPathOf(sr);
    return toWireVolume(path, await filesr.snapshotVolume(path, key, { host: hostUuid() }));
  },
  "Volume.clone": async ({ sr, key }) => {
    const path = srPathOf(sr);
    return toWireVolume(path, await filesr.cloneVolume(path, key, { host: hostUuid() }));
  },
  "Volume.copy": async ({ sr, key, dest_sr }) => {
    const dest = srPathOf(dest_sr);
    return toWireVolume(dest, await filesr.copyVolume(srPathOf(sr), key, dest));
  },
  "Volume.destroy": async ({ sr, key }) =>
    collectingGarbage(sr, async (path) => {
      await filesr.destroyVolume(path, key);
      // Nothing else hears of the volume going: its nbd datapath daemon's logs go now.
      removeDaemonLogs(daemonName(volumeUri("nbd", path, key)));
    }),
  "Volume.revert": async ({ sr, snapshot, key }) => collectingGarbage(sr, (path) => filesr.revertVolume(path, snapshot, key)),
  "Volume.set_name": async ({ sr, key, new_name }) => (await filesr.setVolumeName(srPathOf(sr), key, new_name), null),
  "Volume.set_description": async ({ sr, key, new_description }) =>
    (await filesr.setVolumeDescription(srPathOf(sr), key, new_description), null),
  "Volume.set": async ({ sr, key, k, v }) => (await filesr.setVolumeKey(srPathOf(sr), key, k, v), null),
  "Volume.unset": async ({ sr, key, k }) => (await filesr.unsetVolumeKey(srPathOf(sr), key, k), null),
  "Volume.resize": async ({ sr, key, new_size }) => (await filesr.resizeVolume(srPathOf(sr), key, new_size), null),
  "Volume.stat": async ({ sr, key }) => {
    const path = srPathOf(sr);
    return toWireVolume(path, await filesr.statVolume(path, key));
  },
  "Volume.compare": async ({ sr, key, key2 }) => filesr.compareVolumes(srPathOf(sr), key, key2),
  "Volume.similar_content": async ({ sr, key }) => filesr.findSimilarVolumes(srPathOf(sr), key),
  "Volume.enable_cbt": async ({ sr, key }) => (await filesr.enableCbt(srPathOf(sr), key), null),
  "Volume.disable_cbt": async ({ sr, key }) => (await filesr.disableCbt(srPathOf(sr), key), null),
  "Volume.data_destroy": async ({ sr, key }) => collectingGarbage(sr, (path) => filesr.destroyVolumeData(path, key)),
  "Volume.list_changed_blocks": async ({ sr, key, key2, offset, length }) =>
    filesr.listChangedBlocks(srPathOf(sr), key, key2, offset, length),
});

