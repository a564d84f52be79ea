// Node's request headers as web Headers, for code written against them (the session cookie, tus's handler).
import type { IncomingMessage } from "node:http";

export function webHeaders(request: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  return headers;
}
