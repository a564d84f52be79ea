// Toolstack failures as tRPC errors: the status that fits, the words from error-descriptions.ts. The code
// stays available (error.data.xenapi) for the UI to branch on; the message never is a stack trace.
import "server-only";

import { TRPCError, type TRPC_ERROR_CODE_KEY } from "@trpc/server";
import { XenApiError } from "../xenapi/errors.ts";
import { toTRPCError } from "./storage-error.ts";
import { describeXenApiError } from "../xenapi/error-descriptions.ts";

function codeFor(code: string): TRPC_ERROR_CODE_KEY {
  switch (code) {
    case "SESSION_INVALID":
      return "UNAUTHORIZED";
    case "RBAC_PERMISSION_DENIED":
      return "FORBIDDEN";
    case "HANDLE_INVALID":
    case "UUID_INVALID":
      return "NOT_FOUND";
    case "VDI_IN_USE":
    case "OTHER_OPERATION_IN_PROGRESS":
    case "SR_HAS_PBD":
    case "MAP_DUPLICATE_KEY":
    case "NETWORK_CONTAINS_VIF":
      return "CONFLICT";
    case "SR_OPERATION_NOT_SUPPORTED":
      return "NOT_IMPLEMENTED";
    case "HOST_OFFLINE":
      return "PRECONDITION_FAILED";
    case "SR_BACKEND_FAILURE":
      return "BAD_GATEWAY";
    default:
      return /^SR_BACKEND_FAILURE_\d+$/.test(code) ? "BAD_GATEWAY" : "BAD_REQUEST";
  }
}

/** Any failure met while serving a procedure, as the TRPCError the browser gets. */
export function consoleError(error: unknown, action?: string): TRPCError {
  if (error instanceof TRPCError) {
    // tRPC wraps whatever a procedure threw; unwrap what has better words than "internal error".
    const unwrap = error.cause instanceof XenApiError || (error.code === "INTERNAL_SERVER_ERROR" && error.cause instanceof Error && !(error.cause instanceof TRPCError));
    return unwrap ? consoleError(error.cause, action) : error;
  }
  if (error instanceof XenApiError) {
    return new TRPCError({ code: codeFor(error.code), message: describeXenApiError(error.code, error.params), cause: error });
  }
  if (isUnreachable(error)) {
    return new TRPCError({ code: "SERVICE_UNAVAILABLE", message: `${(error as Error).message}. Is the toolstack running?`, cause: error });
  }
  return toTRPCError(error, action ?? "The request");
}

function isUnreachable(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("cannot reach the toolstack");
}
