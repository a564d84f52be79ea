// Plugin failures reach the browser as tRPC errors whose message says what was attempted and what the plugin
// (or the script runner) answered, so an administrator can act on it without reading server logs.
import "server-only";

import { TRPCError, type TRPC_ERROR_CODE_KEY } from "@trpc/server";
import { CALLER_CODES, StorageError } from "../storage/errors.ts";

/** Wraps any failure of `action` (e.g. "Plugin.diagnostics on 'scratch'") in a TRPCError. */
export function toTRPCError(error: unknown, action: string): TRPCError {
  if (error instanceof TRPCError) return error;
  if (error instanceof StorageError) {
    return new TRPCError({ code: codeFor(error), message: `${action} failed: ${error.message}`, cause: error });
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new TRPCError({ code: "INTERNAL_SERVER_ERROR", message: `${action} failed: ${reason}`, cause: error });
}

function codeFor(error: StorageError): TRPC_ERROR_CODE_KEY {
  if (error.errorConstructor === "Unimplemented" || error.code === CALLER_CODES.scriptMissing) return "NOT_IMPLEMENTED";
  if (error.errorConstructor === "SR_does_not_exist" || error.errorConstructor === "Volume_does_not_exist") return "NOT_FOUND";
  // The plugin is the upstream of this request: its failures are a bad gateway, not a console bug.
  return "BAD_GATEWAY";
}
