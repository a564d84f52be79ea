// XenAPI values as they travel. JSON-RPC carries plain JSON; XML-RPC needs types JSON does not keep, so the
// two that matter are marked: a float (XenDouble: `<double>`, where a whole number would otherwise go as an
// int64 string) and a date (strings of xapi's form 20261123T10:08:00Z go as `<dateTime.iso8601>`).

export class XenDouble {
  readonly value: number;
  constructor(value: number) {
    this.value = value;
  }
  toJSON(): number {
    return this.value;
  }
}

export type XenValue = string | number | boolean | XenDouble | null | XenValue[] | { [key: string]: XenValue };
export type XenRecord = { [key: string]: XenValue };

export const XEN_DATE = /^\d{8}T\d{2}:\d{2}:\d{2}Z$/;

/** A date as xapi writes it: 20261123T10:08:00Z (UTC, no separators in the date, no fraction). */
export function xenDate(date: Date = new Date()): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z").replaceAll("-", "");
}

/** XenAPI's dates ("20261125T13:50:12Z", or RFC 3339) as milliseconds; undefined for the epoch (not set) or garbage. */
export function parseXenDate(text: string): number | undefined {
  const match = /^(\d{4})-?(\d{2})-?(\d{2})T(\d{2}:\d{2}:\d{2})(?:\.\d+)?Z$/.exec(text);
  if (match === null) return undefined;
  const ms = Date.parse(`${match[1]}-${match[2]}-${match[3]}T${match[4]}Z`);
  return ms > 0 ? ms : undefined;
}

/** The null reference, as XenAPI spells it. */
export const NULL_REF = "OpaqueRef:NULL";

export function newRef(): string {
  return `OpaqueRef:${crypto.randomUUID()}`;
}

/** Fields of each class that are floats in XenAPI (the rest of the numbers are int64). */
const FLOAT_FIELDS: Record<string, readonly string[]> = {
  task: ["progress"],
  VM: ["HVM_shadow_multiplier"],
};

/** A stored record as the API presents it: float fields marked for XML-RPC. */
export function present(cls: string, record: XenRecord): XenRecord {
  const floats = FLOAT_FIELDS[cls];
  if (floats === undefined) return record;
  const out = { ...record };
  for (const field of floats) {
    const value = out[field];
    if (typeof value === "number") out[field] = new XenDouble(value);
  }
  return out;
}
