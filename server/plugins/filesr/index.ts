// The file SR library: on-disk format and operations under Hangar's `file` volume plugin and its `file` and
// `nbd` datapath plugins. Every function takes the SR directory path first; see README.md.
export { FileSrError, type FileSrErrorKind } from "./errors.ts";
export { CLUSTER_SIZE } from "./layout.ts";
export { localHostId } from "./liveness.ts";
export {
  attachSr,
  createSr,
  datasourceUid,
  destroySr,
  detachSr,
  openSr,
  probeSrs,
  setSrDescription,
  setSrName,
  statSr,
  type Health,
  type SrInfo,
  type SrStat,
} from "./sr.ts";
export type { Volume, VolumeType } from "./volume-records.ts";
export {
  cloneVolume,
  createVolume,
  destroyVolume,
  findSimilarVolumes,
  listVolumes,
  resizeVolume,
  revertVolume,
  setVolumeDescription,
  setVolumeKey,
  setVolumeName,
  snapshotVolume,
  statVolume,
  unsetVolumeKey,
} from "./volumes.ts";
export { compareVolumes, type Blocklist } from "./compare.ts";
export { copyVolume } from "./copy.ts";
export { destroyVolumeData, disableCbt, enableCbt, listChangedBlocks, type ChangedBlocks } from "./cbt.ts";
export { clearActivation, listActivations, recordActivation, type Activation, type ActivationMode } from "./activations.ts";
export { materializeFlatFile, openVolumeData, type OpenVolumeDataOptions, type VolumeData } from "./volume-data.ts";
export { collectGarbage, startGarbageCollector, type GcReport } from "./gc.ts";
export { readSrIo, type IoCounters } from "./stats.ts";
export {
  defaultMetricsDir,
  readRrddFile,
  runDatasourceDaemon,
  startDatasourceDaemon,
  writeSrDatasources,
  type DatasourceSample,
  type RrddFile,
} from "./datasources.ts";
