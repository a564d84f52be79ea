// What the RBAC tests share: a call's outcome, its XenAPI error or "ok", to compare whole.
import { XenApiError } from "../../xenapi/errors.ts";

export async function outcome(promise: Promise<unknown>): Promise<XenApiError | "ok"> {
  try {
    await promise;
    return "ok";
  } catch (error) {
    if (error instanceof XenApiError) return error;
    throw error;
  }
}
