// Failures met inside a call, as the XenAPI errors its caller gets: a plugin's own, or anything else.
import { StorageError } from "../storage/errors.ts";
import { XenApiError, xenErrors } from "../xenapi/errors.ts";

/**
 * A plugin's failure as the caller sees it: the plugin's own SR_BACKEND_FAILURE[_<n>] error with its
 * params (e.g. ["Volume_does_not_exist", "v1"]); a failure to reach or understand the plugin
 * (SCRIPT_MISSING, PLUGIN_RESULT_INVALID, a time-out, …) as SR_BACKEND_FAILURE with that code first.
 */
export function fromStorageError(error: StorageError): XenApiError {
  if (/^SR_BACKEND_FAILURE(_\d+)?$/.test(error.code)) return new XenApiError(error.code, error.params, error.message);
  return new XenApiError("SR_BACKEND_FAILURE", [error.code, ...error.params], error.message);
}

/** Anything thrown inside a call as the XenAPI error the caller gets. */
export function toXenApiError(error: unknown): XenApiError {
  if (error instanceof XenApiError) return error;
  if (error instanceof StorageError) return fromStorageError(error);
  return xenErrors.internal(error instanceof Error ? error.message : String(error));
}
