// Errors as they travel between toolstack and plugin (compat-notes §1):
// {"code":"SR_BACKEND_FAILURE","params":["Volume_does_not_exist","v1"],"backtrace":{...}}
import * as z from "zod/mini";
import { ERROR_CONSTRUCTORS, type ErrorConstructor } from "./types.ts";

/** Codes a caller reports for failures of its own, as xapi-storage-script does. */
export const CALLER_CODES = {
  scriptMissing: "SCRIPT_MISSING",
  scriptNotExecutable: "SCRIPT_NOT_EXECUTABLE",
  scriptFailed: "SCRIPT_FAILED",
  incorrectParameters: "INCORRECT_PARAMETERS",
  missingUri: "MISSING_URI",
  /** The plugin answered, but not with a value of the method's result type. */
  invalidResult: "PLUGIN_RESULT_INVALID",
  /** A JSON-RPC plugin could not be reached or answered something that is not JSON-RPC. */
  transportFailed: "TRANSPORT_FAILED",
} as const;

export const BACKEND_FAILURE = "SR_BACKEND_FAILURE";

const ZWireError = z.object({
  code: z.string(),
  params: z.pipe(
    z._default(z.array(z.unknown()), []),
    z.transform((params: unknown[]) => params.map((p) => (typeof p === "string" ? p : JSON.stringify(p)))),
  ),
  backtrace: z.optional(z.unknown()),
});
export type WireError = { code: string; params: string[]; backtrace: { error: string; files: string[]; lines: number[] } };

const constructorByLowerName = new Map(ERROR_CONSTRUCTORS.map((c) => [c.toLowerCase(), c]));

export class StorageError extends Error {
  readonly code: string;
  readonly params: string[];
  /** The interface's error constructor when params[0] names one (e.g. Volume_does_not_exist). */
  readonly errorConstructor: ErrorConstructor | undefined;

  constructor(code: string, params: string[], message?: string) {
    super(message ?? describe(code, params));
    this.name = "StorageError";
    this.code = code;
    this.params = params;
    this.errorConstructor = params[0] === undefined ? undefined : constructorByLowerName.get(params[0].toLowerCase());
  }

  /** The payload after the constructor name, e.g. the key of Volume_does_not_exist. */
  get detail(): string[] {
    return this.errorConstructor === undefined ? this.params : this.params.slice(1);
  }

  toWire(): WireError {
    return { code: this.code, params: this.params, backtrace: { error: this.message, files: [], lines: [] } };
  }
}

function describe(code: string, params: string[]): string {
  return params.length === 0 ? code : `${code}: ${params.join(", ")}`;
}

/** Reads an error object a plugin printed; undefined when the value is not one. */
export function parseWireError(value: unknown): StorageError | undefined {
  const parsed = ZWireError.safeParse(value);
  return parsed.success ? new StorageError(parsed.data.code, parsed.data.params) : undefined;
}

/** The interface's error constructors, as an SR_BACKEND_FAILURE whose params[0] names the constructor. */
export const storageErrors = {
  unimplemented: (method: string) => fromConstructor("Unimplemented", method),
  srNotAttached: (sr: string) => fromConstructor("Sr_not_attached", sr),
  srDoesNotExist: (sr: string) => fromConstructor("SR_does_not_exist", sr),
  volumeDoesNotExist: (key: string) => fromConstructor("Volume_does_not_exist", key),
  activatedOnAnotherHost: (hostUuid: string) => fromConstructor("Activated_on_another_host", hostUuid),
  cancelled: (operation: string) => fromConstructor("Cancelled", operation),
  /** Any other failure, with a message an administrator can act on. */
  backendFailure: (message: string, ...details: string[]) => new StorageError(BACKEND_FAILURE, [message, ...details]),
};

function fromConstructor(name: ErrorConstructor, payload: string): StorageError {
  return new StorageError(BACKEND_FAILURE, [name, payload]);
}
