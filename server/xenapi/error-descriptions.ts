// XenAPI error codes in words an administrator can act on: for the console's messages, the task page and the
// CLI. The code stays what callers branch on; these sentences are only for people.

const WORDS: Record<string, (p: readonly string[]) => string> = {
  SESSION_INVALID: () => "Your session has ended. Log in again.",
  SESSION_AUTHENTICATION_FAILED: (p) => (p[1]?.startsWith("Too many failed logins") ? p[1] : "Wrong user name or password."),
  SESSION_AUTHORIZATION_FAILED: () => "This account may not use this pool: a pool administrator adds it (or one of its groups) on the Users page.",
  RBAC_PERMISSION_DENIED: (p) => `Your role does not allow this (${p[0] ?? "?"}). ${(p[1] ?? "").replace(/^No permission in user session\. \(Roles with this permission: (.*)\)$/, "Roles that may: $1.")}`,
  SUBJECT_ALREADY_EXISTS: () => "That user or group is already listed.",
  SUBJECT_CANNOT_BE_RESOLVED: () => "The directory has no user or group with that DN.",
  ROLE_NOT_FOUND: () => "No such role.",
  AUTH_IS_DISABLED: () => "The directory is off: turn it on first.",
  AUTH_ALREADY_ENABLED: () => "A directory is already on: turn it off first.",
  AUTH_ENABLE_FAILED: (p) => `The directory could not be used: ${p[0] ?? "no reason given"}`,
  AUTH_SERVICE_ERROR: (p) => `The directory failed: ${p[0] ?? "no reason given"}`,
  CHANGE_PASSWORD_REJECTED: (p) => `The password was not changed: ${p[0] ?? "no reason given"}.`,
  HANDLE_INVALID: (p) => `The ${thing(p[0])} no longer exists: it may have been removed in another window.`,
  UUID_INVALID: (p) =>
    p[0] === "VDI" ? "The volume no longer exists: it may have been destroyed in another window." : `No ${thing(p[0])} has the uuid ${p[1] ?? ""}.`,
  DEFAULT_SR_NOT_FOUND: () => "The pool has no default SR. Choose an SR, or make one the default.",
  SR_NOT_ATTACHED: () => "The SR is detached. Attach it first.",
  SR_HAS_PBD: () => "The SR is still attached. Detach it first.",
  SR_UNKNOWN_DRIVER: (p) => `No volume plugin handles SRs of type "${p[0] ?? "?"}".`,
  SR_OPERATION_NOT_SUPPORTED: () => "The SR's plugin does not support this operation.",
  SR_BACKEND_FAILURE: (p) =>
    p[0] === "Volume_does_not_exist"
      ? "The volume no longer exists: it may have been destroyed in another window."
      : `The storage plugin failed: ${backendReason(p)}`,
  VDI_IN_USE: () => "The volume is in use (by a VM or a running task).",
  OTHER_OPERATION_IN_PROGRESS: () => "Another operation is running on this object. Wait for it to finish.",
  VDI_COPY_FAILED: (p) => `The copy failed: ${p.join(" ") || "no reason given"}`,
  MIRROR_FAILED: (p) => `The mirror failed: ${p.join(" ") || "no reason given"}`,
  IMPORT_ERROR: (p) => `The import failed: ${p.join(" ") || "no reason given"}`,
  TASK_CANCELLED: () => "The task was cancelled.",
  TASK_INTERRUPTED: () => "The toolstack restarted while the task ran: it was stopped and cleaned up.",
  OPERATION_NOT_ALLOWED: (p) => `Not allowed now: ${p.join(" ")}`,
  INVALID_VALUE: (p) => `Invalid value ${p[1] ? `"${p[1]}" ` : ""}for ${p[0] ?? "a field"}.`,
  VALUE_NOT_SUPPORTED: (p) => `The value ${p[1] ? `"${p[1]}" ` : ""}is not supported for ${p[0] ?? "this field"}${p[2] ? `: ${p[2]}` : ""}.`,
  MAP_DUPLICATE_KEY: (p) => `The key "${p[3] ?? p[2] ?? ""}" is already set.`,
  NETWORK_CONTAINS_VIF: () => "The network is still used by VM interfaces.",
  MEMORY_CONSTRAINT_VIOLATION: (p) => `Memory settings are inconsistent: ${p.join(" ")}`,
  VDI_LOCATION_MISSING: () => "No volume is at that location in the SR.",
  VM_BAD_POWER_STATE: (p) => `The VM is ${p[2] ?? "in another state"}; this needs it ${p[1] ?? "in another power state"}.`,
  MESSAGE_METHOD_UNKNOWN: (p) => `The toolstack does not know the call ${p[0] ?? ""}: it may be another toolstack or an older Hangar.`,
  PBD_EXISTS: () => "The SR already has a connection (PBD) to this host.",
  HOST_OFFLINE: (p) => `${p[1] ? `${p[1][0]!.toUpperCase()}${p[1].slice(1)}` : "The host is offline"}; its SRs cannot be used until it is back.`,
  SR_HAS_NO_PBDS: () => "The SR has no connection (PBD) to this host: it cannot be attached from here.",
};

/** XenAPI class names as people say them. */
function thing(cls: string | undefined): string {
  if (cls === undefined) return "object";
  return ({ VDI: "volume", VBD: "disk link", PBD: "SR connection", VIF: "network interface" } as Record<string, string>)[cls] ?? cls;
}

/** What a plugin failure's first parameter (an interface error constructor or a caller code) means. */
const BACKEND_WORDS: Record<string, string> = {
  SR_does_not_exist: "the SR does not exist",
  Sr_not_attached: "the SR is not attached",
  Unimplemented: "the plugin does not implement this call",
  Cancelled: "the operation was cancelled",
  Activated_on_another_host: "the volume is active on another host",
  SCRIPT_FAILED: "the plugin crashed, timed out or answered garbage",
  SCRIPT_MISSING: "the plugin has no script for this call",
  SCRIPT_NOT_EXECUTABLE: "the plugin's script for this call is not executable",
  PLUGIN_RESULT_INVALID: "the plugin answered something of the wrong shape",
  TRANSPORT_FAILED: "the plugin's daemon could not be reached",
};

function backendReason(p: readonly string[]): string {
  const [first = "", ...rest] = p;
  const words = BACKEND_WORDS[first];
  if (words !== undefined) return rest.some(Boolean) ? `${words}: ${rest.filter(Boolean).join(" ")}` : words;
  return rest.filter(Boolean).join(" ") || first || "no reason given";
}

/** A XenAPI error code and its parameters as one sentence. */
export function describeXenApiError(code: string, params: readonly string[] = []): string {
  // A plugin's numbered failures (SR_BACKEND_FAILURE_<n>) read as its plain one.
  const words = WORDS[code] ?? (/^SR_BACKEND_FAILURE_\d+$/.test(code) ? WORDS.SR_BACKEND_FAILURE : undefined);
  if (words !== undefined) return words(params);
  return params.length > 0 ? `${code}: ${params.join(", ")}` : code;
}

/** A task's error_info ([code, ...params]) in words; "" for none. */
export function describeTaskError(errorInfo: readonly string[]): string {
  if (errorInfo.length === 0) return "";
  return describeXenApiError(errorInfo[0]!, errorInfo.slice(1));
}
