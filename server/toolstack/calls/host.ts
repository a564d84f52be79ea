// host.*: this host's record (made by the core on first start), as xen-api and other clients read it.
import { mapFieldCalls } from "../accessors.ts";
import { objectGetters } from "./getters.ts";

const HOST_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "hostname",
  "address",
  "enabled",
  "API_version_major",
  "API_version_minor",
  "API_version_vendor",
  "software_version",
  "other_config",
  "resident_VMs",
  "PBDs",
  "PIFs",
  "allowed_operations",
  "current_operations",
];

export const hostCalls = [...objectGetters("host", HOST_FIELDS), ...mapFieldCalls("host", "other_config")];
