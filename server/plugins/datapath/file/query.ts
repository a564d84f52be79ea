// What Plugin.Query answers, static so that call loads nothing else.
import type { DatapathDescription } from "../../runtime/datapath-query.ts";

export const INFO: DatapathDescription = {
  scheme: "file",
  name: "File datapath",
  description: "Hands out volumes of file SRs as raw files (File implementation)",
  // A raw file cannot refuse writes: read-only activation is bookkeeping here (exclusive with read-write).
  features: ["NONPERSISTENT", "VDI_ACTIVATE_READONLY"],
  version: "1.0.0",
};
