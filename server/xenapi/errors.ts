// XenAPI errors: a code and string parameters, as xapi reports them (ErrorDescription = [code, ...params]).
export class XenApiError extends Error {
  readonly code: string;
  readonly params: string[];
  constructor(code: string, params: readonly unknown[] = [], message?: string) {
    const strings = params.map((p) => (typeof p === "string" ? p : JSON.stringify(p)));
    super(message ?? `${code}${strings.length > 0 ? `: ${strings.join(", ")}` : ""}`);
    this.name = "XenApiError";
    this.code = code;
    this.params = strings;
  }

  get description(): string[] {
    return [this.code, ...this.params];
  }
}

export const xenErrors = {
  sessionAuthenticationFailed: (user: string) =>
    new XenApiError("SESSION_AUTHENTICATION_FAILED", [user, "Authentication failure"]),
  sessionInvalid: (ref: string) => new XenApiError("SESSION_INVALID", [ref]),
  handleInvalid: (cls: string, ref: string) => new XenApiError("HANDLE_INVALID", [cls, ref]),
  uuidInvalid: (cls: string, uuid: string) => new XenApiError("UUID_INVALID", [cls, uuid]),
  methodUnknown: (method: string) => new XenApiError("MESSAGE_METHOD_UNKNOWN", [method]),
  parameterCountMismatch: (method: string, expected: number, received: number) =>
    new XenApiError("MESSAGE_PARAMETER_COUNT_MISMATCH", [method, String(expected), String(received)]),
  fieldTypeError: (field: string) => new XenApiError("FIELD_TYPE_ERROR", [field]),
  defaultSrNotFound: (sr: string) => new XenApiError("DEFAULT_SR_NOT_FOUND", [sr]),
  operationNotAllowed: (reason: string) => new XenApiError("OPERATION_NOT_ALLOWED", [reason]),
  vdiInUse: (vdi: string, operation: string) => new XenApiError("VDI_IN_USE", [vdi, operation]),
  srHasNoPbds: (sr: string) => new XenApiError("SR_HAS_NO_PBDS", [sr]),
  srNotAttached: (sr: string) => new XenApiError("SR_NOT_ATTACHED", [sr]),
  srUnknownDriver: (type: string) => new XenApiError("SR_UNKNOWN_DRIVER", [type]),
  invalidValue: (field: string, value: string) => new XenApiError("INVALID_VALUE", [field, value]),
  eventsLost: () => new XenApiError("EVENTS_LOST"),
  eventFromTokenParseFailure: (token: string) => new XenApiError("EVENT_FROM_TOKEN_PARSE_FAILURE", [token]),
  taskCancelled: (task: string) => new XenApiError("TASK_CANCELLED", [task]),
  internal: (message: string) => new XenApiError("INTERNAL_ERROR", [message]),
};
