// Calls several classes share beyond the stored-record getters (calls/getters.ts): the getters of classes
// whose records are computed (SR, VDI), and setters of stored records' plain and map fields.
import { z } from "zod";
import { objectErrors } from "./object-errors.ts";
import type { Toolstack } from "./toolstack.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { method, type MethodDef } from "./methods.ts";
import { zRef, zString, zStringMap } from "../xenapi/params.ts";
import type { XenRecord, XenValue } from "../xenapi/values.ts";

export interface RecordSource {
  all(ts: Toolstack): Promise<Map<string, XenRecord>>;
  get(ts: Toolstack, ref: string): Promise<XenRecord>;
  /** The ref of a uuid, or UUID_INVALID. */
  byUuid(ts: Toolstack, uuid: string): Promise<string>;
}

/** get_all, get_all_records, get_record, get_by_uuid, get_by_name_label and get_<field> of a computed class. */
export function computedGetters(cls: string, source: RecordSource, fields: readonly string[]): MethodDef[] {
  return [
    method(`${cls}.get_all`, [], async ({ ts }) => [...(await source.all(ts)).keys()]),
    method(`${cls}.get_all_records`, [], async ({ ts }) => Object.fromEntries(await source.all(ts))),
    method(`${cls}.get_record`, [["self", zRef]], ({ ts }, ref) => source.get(ts, ref)),
    method(`${cls}.get_by_uuid`, [["uuid", zString]], ({ ts }, uuid) => source.byUuid(ts, uuid)),
    method(`${cls}.get_by_name_label`, [["label", zString]], async ({ ts }, label) =>
      [...(await source.all(ts))].filter(([, record]) => record.name_label === label).map(([ref]) => ref),
    ),
    ...fields.map((field) => method(`${cls}.get_${field}`, [["self", zRef]], async ({ ts }, ref) => (await source.get(ts, ref))[field] ?? "")),
  ];
}

/** set_<field>(self, value) of stored records; `check` may refuse a value given the current record. */
export function fieldSetter<S extends z.ZodType>(
  cls: string,
  field: string,
  schema: S,
  check?: (value: z.output<S>, record: XenRecord) => void,
): MethodDef {
  return method(`${cls}.set_${field}`, [["self", zRef], ["value", schema]], async ({ ts }, ref, value) => {
    await ts.objects.update(cls, ref, (record) => {
      check?.(value, record);
      return { ...record, [field]: value as XenValue };
    });
  });
}

/** set_<field>, add_to_<field> (MAP_DUPLICATE_KEY for a key present) and remove_from_<field> of a map field. */
export function mapFieldCalls(cls: string, field: string): MethodDef[] {
  const map = (record: XenRecord) => (record[field] ?? {}) as Record<string, string>;
  return [
    fieldSetter(cls, field, zStringMap),
    method(`${cls}.add_to_${field}`, [["self", zRef], ["key", zString], ["value", zString]], async ({ ts }, ref, key, value) => {
      await ts.objects.update(cls, ref, (record) => {
        if (Object.hasOwn(map(record), key)) throw objectErrors.mapDuplicateKey(cls, field, ref, key);
        return { ...record, [field]: { ...map(record), [key]: value } };
      });
    }),
    method(`${cls}.remove_from_${field}`, [["self", zRef], ["key", zString]], async ({ ts }, ref, key) => {
      await ts.objects.update(cls, ref, (record) => {
        const { [key]: _removed, ...rest } = map(record);
        return { ...record, [field]: rest };
      });
    }),
  ];
}

/** A create call's record argument as it arrives (a struct). */
export const zRecordArg = z.record(z.string(), z.unknown());

/** A stored class's fields a create call takes: each one's schema and its default (none: required). */
export type FieldSpec = Record<string, readonly [z.ZodType, XenValue?]>;

/**
 * The create call's record argument: the fields of `spec` (each defaulted unless required), other fields
 * ignored as xapi ignores them. A missing required field or one of the wrong type is FIELD_TYPE_ERROR.
 */
export function parseCreateRecord(spec: FieldSpec, given: Record<string, unknown>): XenRecord {
  const record: XenRecord = {};
  for (const [field, [schema, fallback]] of Object.entries(spec)) {
    if (given[field] === undefined && fallback !== undefined) {
      record[field] = structuredClone(fallback);
      continue;
    }
    const parsed = schema.safeParse(given[field]);
    if (!parsed.success) throw xenErrors.fieldTypeError(field);
    record[field] = parsed.data as XenValue;
  }
  return record;
}
