// The tRPC side of import from URL: refusals (a forbidden address, an SR without room…) become BAD_REQUEST in words.
import "server-only";

import { TRPCError } from "@trpc/server";
import type { ConsoleSession } from "../../auth/session.ts";
import type { XenApiClient } from "../../xenapi/client.ts";
import { UploadRefusal } from "../../transfers/upload/validate.ts";
import { UrlRefusal } from "../../transfers/url-import/safe-fetch.ts";
import { cancelUrlImport, startUrlImport } from "../../transfers/url-import/import-url.ts";
import { isEnded, readState } from "../../transfers/upload/state.ts";

export async function importFromUrl(xapi: XenApiClient, session: ConsoleSession, input: { url: string; sr: string; diskOnly?: boolean; force?: boolean }): Promise<{ id: string }> {
  try {
    return await startUrlImport(xapi, session, input);
  } catch (error) {
    if (error instanceof UrlRefusal || error instanceof UploadRefusal) throw new TRPCError({ code: "BAD_REQUEST", message: error.message, cause: error });
    throw error;
  }
}

/** Cancels one of the user's imports from URL (a browser upload is cancelled through tus's DELETE). */
export async function cancelTransfer(user: string, id: string): Promise<{ id: string }> {
  const state = await readState(id);
  if (state === undefined || state.user !== user) throw new TRPCError({ code: "NOT_FOUND", message: "No such import: it may have been cleaned up." });
  if (isEnded(state.status)) throw new TRPCError({ code: "BAD_REQUEST", message: "That import has already ended." });
  await cancelUrlImport(id);
  return { id };
}
