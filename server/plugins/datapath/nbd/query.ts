// What Plugin.Query answers, static so that call loads nothing else.
import type { DatapathDescription } from "../../runtime/datapath-query.ts";

export const INFO: DatapathDescription = {
  scheme: "nbd",
  name: "NBD datapath",
  description: "Serves volumes of file SRs over NBD on unix sockets (Nbd implementation), with copy and mirror",
  features: ["NONPERSISTENT", "VDI_ACTIVATE_READONLY", "VDI_MIRROR_IN", "VDI_MIRROR"],
  version: "1.0.0",
};
