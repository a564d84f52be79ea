// The console fetching a URL an administrator gave it (import from URL): http(s) only, redirects followed and
// checked hop by hop, a size limit, timeouts, and no requests to this host's own addresses, loopback,
// link-local or unspecified ones unless allowed (a URL must not turn the console into a way to reach what
// only the server can reach). The address checked is the address connected to: no second DNS answer.
import { lookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";
import http from "node:http";
import https from "node:https";
import { BlockList, isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { Readable } from "node:stream";

export interface UrlFetchOptions {
  /** Largest body accepted (bytes); a bigger Content-Length is refused at once, a longer body is cut with an error. */
  maxBytes: number;
  /** Connecting and waiting for the answer's headers. */
  connectTimeoutMs?: number;
  /** Longest silence while the body flows. */
  idleTimeoutMs?: number;
  maxRedirects?: number;
  /** Allow loopback, link-local and this host's own addresses (HANGAR_URL_IMPORT_ALLOW_LOCAL=1). */
  allowLocal?: boolean;
  signal?: AbortSignal;
}

export interface FetchedUrl {
  /** The URL finally answered, after redirects. */
  url: string;
  /** Content-Length when the server gave one. */
  size: number | undefined;
  body: Readable;
}

/** A URL the console will not fetch, or a fetch that failed: the message says why, in words. */
export class UrlFetchError extends Error {}

const forbidden = new BlockList();
forbidden.addSubnet("127.0.0.0", 8, "ipv4");
forbidden.addSubnet("169.254.0.0", 16, "ipv4");
forbidden.addSubnet("0.0.0.0", 8, "ipv4");
forbidden.addAddress("::1", "ipv6");
forbidden.addAddress("::", "ipv6");
forbidden.addSubnet("fe80::", 10, "ipv6");
forbidden.addSubnet("::ffff:127.0.0.0", 104, "ipv6");
forbidden.addSubnet("::ffff:169.254.0.0", 112, "ipv6");

/** Why the console may not connect to `address`, or undefined when it may. */
export function refusedAddress(address: string): string | undefined {
  const family = isIP(address) === 6 ? "ipv6" : "ipv4";
  if (forbidden.check(address, family)) return `${address} is a loopback, link-local or unspecified address`;
  for (const list of Object.values(networkInterfaces())) {
    for (const own of list ?? []) if (own.address === address) return `${address} is an address of the console's own host`;
  }
  return undefined;
}

/** A lookup for http.request that connects only to the addresses checked here. */
function checkedLookup(allowLocal: boolean): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { all: true }).then(
      (addresses) => {
        const why = allowLocal ? undefined : addresses.map((a) => refusedAddress(a.address)).find((reason) => reason !== undefined);
        if (why !== undefined) return callback(new UrlFetchError(`${hostname} resolves to ${why}: the console does not fetch from there (an administrator may allow it with HANGAR_URL_IMPORT_ALLOW_LOCAL=1)`), "", 4);
        if (options.all) return callback(null, addresses);
        callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(new UrlFetchError(`${hostname} could not be resolved (${error.code ?? error.message})`), "", 4),
    );
  };
}

function parse(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UrlFetchError(`"${text}" is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UrlFetchError(`only http:// and https:// URLs can be imported, not ${url.protocol}`);
  if (url.username !== "" || url.password !== "") throw new UrlFetchError("URLs with credentials in them are not fetched: they would be stored and shown in task names");
  return url;
}

function request(url: URL, options: UrlFetchOptions): Promise<http.IncomingMessage> {
  // An address written in the URL is connected to without a lookup: it is checked here instead.
  const literal = url.hostname.replace(/^\[(.*)\]$/, "$1");
  const why = isIP(literal) === 0 || options.allowLocal ? undefined : refusedAddress(literal);
  if (why !== undefined) return Promise.reject(new UrlFetchError(`${why}: the console does not fetch from there (an administrator may allow it with HANGAR_URL_IMPORT_ALLOW_LOCAL=1)`));
  const get = url.protocol === "https:" ? https.get : http.get;
  return new Promise((resolve, reject) => {
    const req = get(url, { lookup: checkedLookup(options.allowLocal ?? false), signal: options.signal, headers: { "user-agent": "hangar-console", accept: "*/*" } }, resolve);
    const connectTimeout = options.connectTimeoutMs ?? 15_000;
    const timer = setTimeout(() => req.destroy(new UrlFetchError(`${url.host} did not answer within ${connectTimeout / 1000} s`)), connectTimeout);
    req.once("response", () => clearTimeout(timer));
    req.once("error", (error) => {
      clearTimeout(timer);
      reject(error instanceof UrlFetchError ? error : new UrlFetchError(`${url.host}: ${(error as NodeJS.ErrnoException).code ?? error.message}`));
    });
  });
}

/** Fetches `text`, following redirects; answers once the final response's headers are in. */
export async function fetchUrl(text: string, options: UrlFetchOptions): Promise<FetchedUrl> {
  let url = parse(text);
  const maxRedirects = options.maxRedirects ?? 5;
  for (let hop = 0; ; hop++) {
    const response = await request(url, options);
    const status = response.statusCode ?? 0;
    if (status >= 300 && status < 400 && response.headers.location !== undefined) {
      response.resume();
      if (hop >= maxRedirects) throw new UrlFetchError(`more than ${maxRedirects} redirects from ${text}`);
      url = parse(new URL(response.headers.location, url).toString());
      continue;
    }
    if (status !== 200) {
      response.resume();
      throw new UrlFetchError(`${url} answered HTTP ${status} ${response.statusMessage ?? ""}`.trim());
    }
    const length = response.headers["content-length"];
    const size = length === undefined ? undefined : Number(length);
    if (size !== undefined && size > options.maxBytes) {
      response.destroy();
      throw new UrlFetchError(`${url} is ${size} bytes, more than the ${options.maxBytes} allowed (HANGAR_URL_IMPORT_MAX_BYTES)`);
    }
    return { url: url.toString(), size, body: limited(response, url, options) };
  }
}

/** The body, cut with an error past maxBytes or after idleTimeoutMs of silence. */
function limited(response: http.IncomingMessage, url: URL, options: UrlFetchOptions): Readable {
  const idle = options.idleTimeoutMs ?? 60_000;
  response.setTimeout(idle, () => response.destroy(new UrlFetchError(`${url.host} sent nothing for ${idle / 1000} s`)));
  let seen = 0;
  return Readable.from(
    (async function* () {
      for await (const chunk of response as AsyncIterable<Buffer>) {
        seen += chunk.length;
        if (seen > options.maxBytes) throw new UrlFetchError(`${url} sent more than the ${options.maxBytes} bytes allowed (HANGAR_URL_IMPORT_MAX_BYTES)`);
        yield chunk;
      }
    })(),
    { objectMode: false },
  );
}
