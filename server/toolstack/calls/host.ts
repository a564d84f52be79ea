// host.*: the pool's hosts (each registers itself on first start), as xen-api and other clients read them.
// `live` is Hangar's (xapi keeps it in host_metrics): false once the host's heartbeat has stopped.
import { mapFieldCalls } from "../accessors.ts";
import { objectGetters } from "./getters.ts";

const HOST_FIELDS = [
  "uuid",
  "name_label",
  "name_description",
  "hostname",
  "address",
  "enabled",
  "live",
  "API_version_major",
  "API_version_minor",
  "API_version_vendor",
  "software_version",
  "other_config",
  "external_auth_type",
  "external_auth_service_name",
  "external_auth_configuration",
  "resident_VMs",
  "PBDs",
  "PIFs",
  "allowed_operations",
  "current_operations",
];

export const hostCalls = [...objectGetters("host", HOST_FIELDS), ...mapFieldCalls("host", "other_config")];
