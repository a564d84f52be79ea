// The file SR library's typed failures as the interface's errors.
import { StorageError, storageErrors } from "../storage/errors.ts";
import { FileSrError } from "./filesr/index.ts";

export function toStorageError(error: unknown): unknown {
  if (!(error instanceof FileSrError)) return error;
  switch (error.kind) {
    case "Invalid":
      return storageErrors.backendFailure(error.message);
    case "Unimplemented":
      return storageErrors.unimplemented(error.params[0] ?? error.message);
    default:
      return new StorageError("SR_BACKEND_FAILURE", [error.kind, ...error.params], error.message);
  }
}

/** Wraps every method of an implementation so library errors leave as interface errors. */
export function mapErrors<T extends Record<string, ((params: never) => unknown) | undefined>>(impl: T): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(impl)) {
    if (fn === undefined) continue;
    wrapped[name] = async (params: never) => {
      try {
        return await fn(params);
      } catch (error) {
        throw toStorageError(error);
      }
    };
  }
  return wrapped as T;
}
