// Schema builders for the ocaml-rpc JSON encoding (compat-notes §1). Each builder accepts what real plugins
// emit and produces the canonical value, which is also the wire form: encoding is validation by the same
// schema followed by JSON.stringify (options omitted, variants as arrays or bare strings).
// zod/mini, not classic zod: plugin entries load this on every call, and mini costs next to nothing to load
// (classic zod adds ~10 ms to each process start).
import * as z from "zod/mini";
import en from "zod/v4/locales/en.js";
import { InexactInteger, IntegralFloat } from "./json.ts";

// zod/mini says "Invalid input" unless a locale is loaded; ours name what was expected ("expected string").
z.config(en());

/** Every schema carries the interface's type name, used by the generated method reference. */
export function named<T extends z.ZodMiniType>(schema: T, wireType: string): T {
  wireTypes.set(schema, wireType);
  return schema;
}

const wireTypes = new WeakMap<z.ZodMiniType, string>();

export function wireTypeName(schema: z.ZodMiniType): string {
  return wireTypes.get(schema) ?? "unknown";
}

type Payload = { issues: z.core.$ZodRawIssue[] };

/** Records a failure inside a transform; the transform's return value is then ignored. */
function failWith(ctx: Payload, input: unknown, message: string): never {
  ctx.issues.push({ code: "custom", message, input });
  return z.NEVER;
}

const NUMERIC_STRING = /^-?\d+$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function describeInput(value: unknown): string {
  if (value instanceof IntegralFloat) return value.source;
  if (value instanceof InexactInteger) return value.source;
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? JSON.stringify(value) : typeof value;
}

function integer(wireType: string) {
  return named(
    z.pipe(z.unknown(), z.transform((value: unknown, ctx): number => {
      const fail = (message: string) => failWith(ctx, value, message);
      let digits: string | undefined;
      if (typeof value === "number") {
        if (Number.isSafeInteger(value)) return value;
        return fail(Number.isInteger(value) ? `${value} cannot be represented exactly` : `expected ${wireType}, got ${value}`);
      }
      if (value instanceof InexactInteger) digits = value.source;
      else if (typeof value === "string" && NUMERIC_STRING.test(value.trim())) digits = value.trim();
      if (digits === undefined) return fail(`expected ${wireType}, got ${describeInput(value)}`);
      const big = BigInt(digits);
      if (big < INT64_MIN || big > INT64_MAX) return fail(`${digits} is out of the ${wireType} range`);
      if (big < BigInt(Number.MIN_SAFE_INTEGER) || big > BigInt(Number.MAX_SAFE_INTEGER)) {
        return fail(`${digits} cannot be represented exactly (beyond ±(2^53 − 1))`);
      }
      return Number(big);
    })),
    wireType,
  );
}

export const int64 = () => integer("int64");
export const int = () => integer("int");

export const float = () =>
  named(
    z.pipe(z.unknown(), z.transform((value: unknown, ctx): number => {
      if (typeof value === "number" && Number.isFinite(value)) return value;
      if (value instanceof IntegralFloat) return value.value;
      // A float is approximate anyway: an integer token too large for exactness is still a valid float.
      if (value instanceof InexactInteger) return Number(value.source);
      if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
      return failWith(ctx, value, `expected float, got ${describeInput(value)}`);
    })),
    "float",
  );

export const string = (wireType = "string") => named(z.string(), wireType);
export const bool = (wireType = "bool") => named(z.boolean(), wireType);

/** `unit`: null and only null. */
export const unit = () => named(z.null(), "unit");

/** `(string * string) list`, encoded as a JSON object. */
export const stringMap = (wireType = "(string * string) list") => named(z.record(z.string(), z.string()), wireType);

export const list = <T extends z.ZodMiniType>(item: T, wireType?: string) =>
  named(z.array(item), wireType ?? `${wireTypeName(item)} list`);

/** An optional struct member: absent (or null, which some writers send) decodes to undefined. */
export const option = <T extends z.ZodMiniType>(inner: T) =>
  named(
    z.optional(z.pipe(z.nullable(inner), z.transform((value: z.output<T> | null) => (value === null ? undefined : value)))),
    `${wireTypeName(inner)} option`,
  );

type Shape = Record<string, z.ZodMiniType>;

/** A struct: object members matched case-insensitively, unknown members ignored. */
export function struct<S extends Shape>(wireType: string, shape: S) {
  const canonical = new Map(Object.keys(shape).map((key) => [key.toLowerCase(), key]));
  const normalise = (value: unknown) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) {
      const name = canonical.get(key.toLowerCase());
      if (name !== undefined && !(name in out && key !== name)) out[name] = member;
    }
    return out;
  };
  return named(z.pipe(z.transform(normalise), z.object(shape)), wireType);
}

/** The member schemas of a struct built by `struct`, for documentation. */
export function structShape(schema: z.ZodMiniType): Shape | undefined {
  const inner = schema instanceof z.ZodMiniPipe ? schema.def.out : schema;
  return inner instanceof z.ZodMiniObject ? (inner.shape as Shape) : undefined;
}

type Constructors = Record<string, z.ZodMiniType | null>;
type VariantValue<C extends Constructors> = {
  [K in keyof C & string]: C[K] extends z.ZodMiniType ? [K, z.output<C[K]>] : K;
}[keyof C & string];

/**
 * A variant: constructors with a payload as `[Tag, payload]`, constant constructors (null here) as a bare
 * `"Tag"`. Tags match case-insensitively; a bare string for a payload constructor is rejected.
 */
export function variant<C extends Constructors>(wireType: string, constructors: C) {
  const tags = new Map(Object.keys(constructors).map((tag) => [tag.toLowerCase(), tag]));
  const expected = Object.keys(constructors).join(" | ");
  return named(
    z.pipe(z.unknown(), z.transform((value: unknown, ctx): VariantValue<C> => {
      const fail = (message: string) => failWith(ctx, value, message);
      const rawTag = typeof value === "string" ? value : Array.isArray(value) ? value[0] : undefined;
      if (typeof rawTag !== "string") return fail(`expected ${wireType} (${expected}), got ${describeInput(value)}`);
      const tag = tags.get(rawTag.toLowerCase());
      if (tag === undefined) return fail(`unknown ${wireType} constructor "${rawTag}" (expected ${expected})`);
      const payloadSchema = constructors[tag];
      if (payloadSchema === null || payloadSchema === undefined) {
        if (Array.isArray(value) && value.length !== 1) return fail(`${tag} takes no payload`);
        return tag as VariantValue<C>;
      }
      if (!Array.isArray(value) || value.length !== 2) return fail(`${tag} needs a payload: ["${tag}", …]`);
      const payload = payloadSchema.safeParse(value[1]);
      if (!payload.success) {
        for (const issue of payload.error.issues) ctx.issues.push({ ...issue, input: value[1], path: [1, ...issue.path] } as never);
        return z.NEVER;
      }
      return [tag, payload.data] as VariantValue<C>;
    })),
    wireType,
  );
}
