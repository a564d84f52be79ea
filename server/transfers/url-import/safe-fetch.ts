// Fetching an administrator's URL from the console without letting it reach what it should not (SSRF): only
// http(s); every address a name resolves to is checked (loopback, link-local, unspecified, multicast and the
// console's own addresses refused unless HANGAR_IMPORT_URL_ALLOW_PRIVATE=1), the connection goes to the address
// that was checked (no DNS rebinding between check and connect), redirects are followed by hand and each hop
// checked again, and the answer must start within a deadline.
import { lookup } from "node:dns/promises";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";

const MAX_REDIRECTS = 5;
const HEADERS_TIMEOUT_MS = 30_000;

export class UrlRefusal extends Error {}

function allowPrivate(): boolean {
  return process.env.HANGAR_IMPORT_URL_ALLOW_PRIVATE === "1";
}

function ownAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) own.add(a.address);
  return own;
}

/** Why an address may not be fetched, or undefined when it may. */
export function forbiddenAddress(address: string): string | undefined {
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  if (isIP(v4) === 4) {
    const [a, b] = v4.split(".").map(Number) as [number, number];
    if (a === 127) return "a loopback address (the console's own host)";
    if (a === 0) return "an unspecified address";
    if (a === 169 && b === 254) return "a link-local address (cloud metadata services live there)";
    if (a >= 224) return "a multicast or reserved address";
  } else {
    const lower = address.toLowerCase();
    if (lower === "::1") return "a loopback address (the console's own host)";
    if (lower === "::") return "an unspecified address";
    if (/^fe[89ab]/.test(lower)) return "a link-local address";
    if (lower.startsWith("ff")) return "a multicast address";
  }
  if (ownAddresses().has(address) || ownAddresses().has(v4)) return "one of the console's own addresses";
  return undefined;
}

/** The address to connect to for `url`'s host, once checked. */
async function checkedAddress(url: URL): Promise<{ address: string; family: number }> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: { address: string; family: number }[];
  try {
    addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true });
  } catch {
    throw new UrlRefusal(`${url.hostname} cannot be resolved.`);
  }
  if (!allowPrivate()) {
    for (const a of addresses) {
      const why = forbiddenAddress(a.address);
      if (why !== undefined) throw new UrlRefusal(`${url.hostname} (${a.address}) is ${why}: the console does not fetch from there unless HANGAR_IMPORT_URL_ALLOW_PRIVATE=1.`);
    }
  }
  return addresses[0]!;
}

export function parseImportUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text.trim());
  } catch {
    throw new UrlRefusal("That is not a URL.");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UrlRefusal("Only http:// and https:// URLs can be imported.");
  return url;
}

/**
 * GET `url`, redirects followed (each hop checked); the answer's status is 200 or a refusal in words. With
 * `from` > 0 the bytes from there are asked for: `resumedAt` is `from` when the server sent them (206), 0 when
 * it sent the whole file again (200).
 */
export async function safeGet(start: URL, signal: AbortSignal, from = 0): Promise<{ response: IncomingMessage; url: URL; resumedAt: number }> {
  let url = start;
  for (let hop = 0; ; hop++) {
    const target = await checkedAddress(url);
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const send = url.protocol === "https:" ? httpsRequest : httpRequest;
      const request = send(url, {
        method: "GET",
        signal,
        headers: { "user-agent": "hangar-console", accept: "*/*", ...(from > 0 ? { range: `bytes=${from}-` } : {}) },
        // Connect to the address that was checked (the Host header and TLS name stay the URL's).
        lookup: ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) =>
          options.all === true ? callback(null, [{ address: target.address, family: target.family }]) : callback(null, target.address, target.family)) as never,
      });
      const timer = setTimeout(() => request.destroy(new UrlRefusal(`${url.host} did not answer within ${HEADERS_TIMEOUT_MS / 1000} s.`)), HEADERS_TIMEOUT_MS);
      request.on("response", (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      request.on("error", (error) => {
        clearTimeout(timer);
        reject(error instanceof UrlRefusal ? error : new UrlRefusal(`${url.host} cannot be reached: ${error.message}`));
      });
      request.end();
    });
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location !== undefined) {
      response.resume();
      if (hop >= MAX_REDIRECTS) throw new UrlRefusal(`More than ${MAX_REDIRECTS} redirects from ${start.host}.`);
      url = parseImportUrl(new URL(response.headers.location, url).toString());
      continue;
    }
    if (status === 206 && from > 0 && new RegExp(`^bytes ${from}-\\d+/\\d+$`).test(response.headers["content-range"] ?? "")) return { response, url, resumedAt: from };
    if (status !== 200) {
      response.resume();
      throw new UrlRefusal(`${url.host} answered HTTP ${status} for ${url.pathname}.`);
    }
    return { response, url, resumedAt: 0 };
  }
}
