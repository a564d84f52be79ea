// What our datapath plugins answer to Plugin.Query, built from their description alone: that call loads
// nothing else (the methods are loaded on first use, see deferPlugin).
import type { QueryResult } from "../../storage/types.ts";
import type { DatapathScheme } from "../uris.ts";

export interface DatapathDescription {
  scheme: DatapathScheme;
  name: string;
  description: string;
  features: string[];
  version: string;
}

export function datapathQuery(info: DatapathDescription): QueryResult {
  return {
    plugin: info.scheme,
    name: info.name,
    description: info.description,
    vendor: "Hangar",
    copyright: "(C) Hangar contributors",
    version: info.version,
    required_api_version: "5.0",
    features: info.features,
    configuration: {},
    required_cluster_stack: [],
  };
}
