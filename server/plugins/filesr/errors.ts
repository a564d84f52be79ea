// Typed failures of the file SR library. `kind` is what a plugin dispatcher turns into the wire error
// (`SR_BACKEND_FAILURE` with params [kind, ...params]); `code` says more precisely what went wrong.
import { formatBytes } from "../../../lib/format.ts";

export type FileSrErrorKind =
  | "Volume_does_not_exist"
  | "SR_does_not_exist"
  | "Sr_not_attached"
  | "Activated_on_another_host"
  | "Unimplemented"
  | "Invalid";

export class FileSrError extends Error {
  readonly kind: FileSrErrorKind;
  readonly params: string[];
  readonly code: string;

  constructor(kind: FileSrErrorKind, code: string, message: string, params: string[] = []) {
    super(message);
    this.name = "FileSrError";
    this.kind = kind;
    this.code = code;
    this.params = params;
  }
}

export function invalid(code: string, message: string): FileSrError {
  return new FileSrError("Invalid", code, message, [message]);
}

export function volumeMissing(key: string): FileSrError {
  return new FileSrError("Volume_does_not_exist", "volume_missing", `volume ${key} does not exist`, [key]);
}

export function srMissing(code: string, path: string, message: string): FileSrError {
  return new FileSrError("SR_does_not_exist", code, message, [path]);
}

export function activatedElsewhere(host: string, key: string): FileSrError {
  return new FileSrError(
    "Activated_on_another_host",
    "activated_on_another_host",
    `volume ${key} is activated on host ${host}`,
    [host],
  );
}

/** A size as people and scripts read it: "1 PiB (1125899906842624 bytes)". */
export function sizeInWords(bytes: number): string {
  return `${formatBytes(bytes)} (${bytes} bytes)`;
}

/**
 * The filesystem's refusal of a file's size (EFBIG) or of the space for it (ENOSPC, EDQUOT) in words naming
 * `what` (e.g. "a volume of 1 PiB (… bytes)"); any other error as it is.
 */
export function spaceRefusal(error: unknown, what: string): unknown {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (code === "EFBIG") return invalid("file_too_large", `${what} is larger than the SR's filesystem allows a file to be (EFBIG)`);
  if (code === "ENOSPC" || code === "EDQUOT") return invalid("no_space", `the SR's filesystem has no space left for ${what} (${code})`);
  return error;
}
