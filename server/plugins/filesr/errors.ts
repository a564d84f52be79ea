// Typed failures of the file SR library. `kind` is what a plugin dispatcher turns into the wire error
// (`SR_BACKEND_FAILURE` with params [kind, ...params]); `code` says more precisely what went wrong.

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
