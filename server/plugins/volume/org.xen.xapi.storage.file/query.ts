// What Plugin.Query answers: static, so that call loads nothing else.
import type { QueryResult } from "../../../storage/types.ts";

export const VERSION = "1.0.0";

export const FEATURES = [
  "SR_PROBE",
  "SR_CREATE",
  "SR_DELETE",
  "SR_ATTACH",
  "SR_DETACH",
  "SR_SCAN",
  "SR_STATS",
  "SR_UPDATE",
  "VDI_CREATE",
  "VDI_DELETE",
  "VDI_ATTACH",
  "VDI_DETACH",
  "VDI_ACTIVATE",
  "VDI_DEACTIVATE",
  "VDI_UPDATE",
  "VDI_SNAPSHOT",
  "VDI_CLONE",
  "VDI_COPY",
  "VDI_REVERT",
  "VDI_RESIZE",
  "VDI_CONFIG_CBT",
  "THIN_PROVISIONING",
  "LARGE_VDI",
];

export const QUERY_RESULT: QueryResult = {
  plugin: "file",
  name: "File SR",
  description: "Volumes as sparse files with copy-on-write layers in a directory of a local filesystem",
  vendor: "Hangar",
  copyright: "(C) Hangar contributors",
  version: VERSION,
  required_api_version: "5.0",
  features: FEATURES,
  configuration: {
    path: "Directory that holds the SR (created if missing; must be empty or hold a Hangar SR)",
    uri: "Alternatively, the directory as a file:// URI",
  },
  required_cluster_stack: [],
};
