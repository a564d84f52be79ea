// The read calls every stored class has: get_all, get_all_records, get_record, get_by_uuid,
// get_by_name_label, and get_<field> for the fields named.
import { method, type MethodDef } from "../methods.ts";
import { zRef, zString } from "../../xenapi/params.ts";
import { present, type XenValue } from "../../xenapi/values.ts";

export function objectGetters(cls: string, fields: readonly string[] = []): MethodDef[] {
  return [
    method(`${cls}.get_all`, [], ({ ts }) => ts.objects.refs(cls)),
    method(`${cls}.get_all_records`, [], async ({ ts }) => {
      const out: Record<string, XenValue> = {};
      for (const { ref, record } of await ts.objects.all(cls)) out[ref] = present(cls, record);
      return out;
    }),
    method(`${cls}.get_record`, [["self", zRef]], async ({ ts }, ref) => present(cls, (await ts.objects.get(cls, ref)).record)),
    method(`${cls}.get_by_uuid`, [["uuid", zString]], async ({ ts }, uuid) => (await ts.objects.getByUuid(cls, uuid)).ref),
    method(`${cls}.get_by_name_label`, [["label", zString]], async ({ ts }, label) => (await ts.objects.getByNameLabel(cls, label)).map((o) => o.ref)),
    ...fields.map((field) =>
      method(`${cls}.get_${field}`, [["self", zRef]], async ({ ts }, ref) => present(cls, (await ts.objects.get(cls, ref)).record)[field] ?? ""),
    ),
  ];
}
