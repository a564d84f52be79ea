// How our plugins name things on the wire: an SR is `file://<directory>`, a volume is offered to the
// datapaths as `<scheme>://<SR directory>?volume=<key>` (scheme `nbd` or `file`, the datapath dir names).
import { isAbsolute, normalize } from "node:path";
import { storageErrors } from "../storage/errors.ts";

export const DATAPATH_SCHEMES = ["nbd", "file"] as const;
export type DatapathScheme = (typeof DATAPATH_SCHEMES)[number];

/** The directory of an SR given as `file:///dir` or as a bare absolute path. */
export function srPathOf(sr: string): string {
  let path = sr;
  if (sr.startsWith("file://")) {
    const url = new URL(sr);
    if (url.host !== "" && url.host !== "localhost") throw storageErrors.srDoesNotExist(sr);
    path = decodeURIComponent(url.pathname);
  }
  if (!isAbsolute(path)) throw storageErrors.backendFailure(`SR ${JSON.stringify(sr)} is not a file:// URI or an absolute path`);
  return normalize(path).replace(/(.)\/$/, "$1");
}

export function srUri(path: string): string {
  return new URL(`file://${path}`).href;
}

const srBases = new Map<string, string>();
/** Characters that form encoding (URLSearchParams) leaves as they are. */
const FORM_SAFE = /^[A-Za-z0-9*._-]+$/;

/** `<scheme>://<SR directory>?volume=<key>`; SR.ls builds thousands of these, so the SR part is built once. */
export function volumeUri(scheme: DatapathScheme, srPath: string, key: string): string {
  const baseKey = `${scheme}:${srPath}`;
  let base = srBases.get(baseKey);
  if (base === undefined) {
    base = new URL(`${scheme}://${srPath}`).href;
    srBases.set(baseKey, base);
  }
  return `${base}?${FORM_SAFE.test(key) ? `volume=${key}` : new URLSearchParams({ volume: key }).toString()}`;
}

/** Parses a volume URI of one of our datapaths; a clear error for anything else. */
export function parseVolumeUri(uri: string, scheme: DatapathScheme): { srPath: string; key: string } {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw storageErrors.backendFailure(`not a URI: ${JSON.stringify(uri)}`);
  }
  const key = url.searchParams.get("volume");
  if (url.protocol !== `${scheme}:` || key === null || key === "") {
    throw storageErrors.backendFailure(`${JSON.stringify(uri)} is not a volume URI of the ${scheme} datapath (${scheme}:///<SR directory>?volume=<key>)`);
  }
  return { srPath: srPathOf(`file://${url.pathname}`), key };
}
