// ova.xml, the XVA's metadata (compat-notes §2): one XML-RPC struct {version, objects}, each object
// {class, id, snapshot} where snapshot is the object's full record and references name other objects' ids.
// The XML-RPC value model is the toolstack's own (xml-rpc.ts); only the layout on top of it is here.
import { z } from "zod";
import { pacer } from "../pacer.ts";
import { parseXmlRpcValueBody } from "../xenapi/call-parser.ts";
import { encodeXmlRpcValue } from "../xenapi/xml-rpc.ts";
import { NULL_REF, type XenRecord, type XenValue } from "../xenapi/values.ts";

export class OvaXmlError extends Error {}

/** Untyped ints arrive as text. */
const int = z.union([z.number().int(), z.string().trim().regex(/^[+-]?\d+$/).transform(Number)]);
const text = z.string().default("");
const record = z.custom<XenRecord>((v) => v !== null && typeof v === "object" && !Array.isArray(v));
/** `<struct/>` and `<value/>` both mean an empty struct. */
const struct = z.union([record, z.literal("").transform((): XenRecord => ({}))]);
const list = z.union([z.array(z.unknown()), z.literal("").transform((): unknown[] => [])]);

const versionSchema = z.object({
  hostname: text,
  date: text,
  product_version: text,
  product_brand: text,
  build_number: text,
  xapi_major: int,
  xapi_minor: int,
  export_vsn: int.default(0),
});

const objectSchema = z.object({ class: z.string().min(1), id: z.string().min(1), snapshot: struct });
const documentSchema = z.object({ version: versionSchema, objects: list });

/**
 * What an ova.xml may hold: a VM of 255 disks and 100 snapshots is some 100,000 values (README "Limits"). It is
 * parsed off the event loop (fast-xml-parser takes ~300 ms a MiB) and checked object by object, in slices. Past
 * 200,000 values the parser worker's heap is at risk: 250,000 values (15 MiB) took 5.4 s, 500,000 exhausted its
 * 256 MiB (the full fuzz run found a 15.8 MiB document of 762,590 values, inside the old limit of 1,000,000,
 * failing so after 7 s).
 */
export const OVA_XML_LIMITS = { maxValues: 200_000, maxDepth: 64 };

export type OvaVersion = z.output<typeof versionSchema>;
export type OvaObject = { class: string; id: string; snapshot: XenRecord };
export type OvaXml = { version: OvaVersion; objects: OvaObject[] };

/** ids in the file are `Ref:<n>`; `OpaqueRef:<uuid>` values are xapi's internal references leaked into the export. */
const FILE_ID = /^Ref:\d+$/;
const LEAKED_REF = /^OpaqueRef:/;

/**
 * A snapshot with references nowhere in the file made null: leaked OpaqueRefs, and ids without an object (xapi
 * gives OpaqueRef:NULL an id of its own). In a set of references a dangling one is dropped, not kept as null.
 * Only the record's own fields are looked at: nested maps (other_config ...) are user data, left byte-exact.
 */
function resolveReferences(snapshot: XenRecord, ids: ReadonlySet<string>): XenRecord {
  const dangling = (value: XenValue) => typeof value === "string" && (LEAKED_REF.test(value) ? value !== NULL_REF : FILE_ID.test(value) && !ids.has(value));
  const out: XenRecord = {};
  for (const [field, value] of Object.entries(snapshot)) {
    const resolved = Array.isArray(value) ? value.filter((item) => !dangling(item)) : dangling(value) ? NULL_REF : value;
    Object.defineProperty(out, field, { value: resolved, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

export async function parseOvaXml(xml: Buffer | string): Promise<OvaXml> {
  let value: XenValue;
  try {
    value = await parseXmlRpcValueBody([typeof xml === "string" ? Buffer.from(xml) : xml], OVA_XML_LIMITS);
  } catch (error) {
    throw new OvaXmlError(`ova.xml: ${(error as Error).message}`);
  }
  const parsed = documentSchema.safeParse(value);
  if (!parsed.success) throw new OvaXmlError(`ova.xml: ${z.prettifyError(parsed.error)}`);
  const pace = pacer();
  const objects: Array<z.output<typeof objectSchema>> = [];
  const ids = new Set<string>();
  for (const [n, raw] of parsed.data.objects.entries()) {
    await pace();
    const object = objectSchema.safeParse(raw);
    if (!object.success) throw new OvaXmlError(`ova.xml: objects[${n}]: ${z.prettifyError(object.error)}`);
    if (ids.has(object.data.id)) throw new OvaXmlError(`ova.xml: object id ${object.data.id} appears twice`);
    ids.add(object.data.id);
    objects.push(object.data);
  }
  const resolved: OvaObject[] = [];
  for (const object of objects) {
    await pace();
    resolved.push({ class: object.class, id: object.id, snapshot: resolveReferences(object.snapshot, ids) });
  }
  return { version: parsed.data.version, objects: resolved };
}

/** ova.xml as xapi writes it: one line, no prolog. */
export function formatOvaXml(ova: OvaXml): string {
  const version: XenRecord = { ...ova.version };
  const objects: XenValue[] = ova.objects.map((object) => ({ class: object.class, id: object.id, snapshot: object.snapshot }));
  return encodeXmlRpcValue({ version, objects });
}
