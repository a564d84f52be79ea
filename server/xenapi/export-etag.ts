// The ETags of the toolstack's exports (/export, /export_raw_vdi): `"<kind>-<date ms>-<20 hex digits>"`. An
// export's bytes depend only on what it is of and its date, so the ETag names that date: a resumed export is
// made again from it, and the console shows it as Last-Modified.
import { createHash } from "node:crypto";

/** Kinds: a VM's XVA export, a VDI's disk export, a VM's OVA export. */
export type ExportEtagKind = "hx1" | "hd1" | "ho1";

/** The ETag of an export of `kind` dated `date`, of what `of` says (JSON-serialised into the digest). */
export function datedEtag(kind: ExportEtagKind, date: Date, of: unknown): string {
  const digest = createHash("sha1").update(JSON.stringify(of)).digest("hex").slice(0, 20);
  return `"${kind}-${date.getTime()}-${digest}"`;
}

/** The date an ETag of `kind` names, or undefined for anything else. */
export function etagDate(etag: string, kind: ExportEtagKind): Date | undefined {
  const match = new RegExp(`^"${kind}-(\\d+)-[0-9a-f]{20}"$`).exec(etag);
  return match === null ? undefined : new Date(Number(match[1]));
}

/** The date an ETag of any export kind names, or undefined for anything else. */
export function anyEtagDate(etag: string): Date | undefined {
  return etagDate(etag, "hx1") ?? etagDate(etag, "ho1") ?? etagDate(etag, "hd1");
}
