// Where a pool member's service listens: its address from the host record, its ports from other_config
// (Hangar's keys; xapi listens on 80 and 443, so a host record without them means the default ports).
import type { XenValue } from "./values.ts";

export const HTTP_PORT_KEY = "hangar-http-port";
export const HTTPS_PORT_KEY = "hangar-https-port";

/** The base URL of a host's service (`http://address:port`), from its record (the toolstack's, or a client's copy). */
export function hostUrl(record: { address?: XenValue; other_config?: XenValue }, scheme: "http" | "https" = "http"): string {
  const address = String(record.address);
  const port = (record.other_config as Record<string, string> | undefined)?.[scheme === "http" ? HTTP_PORT_KEY : HTTPS_PORT_KEY];
  return `${scheme}://${address.includes(":") ? `[${address}]` : address}${port === undefined ? "" : `:${port}`}`;
}
