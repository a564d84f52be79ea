// Encoding and decoding of method parameters and results, driven by the method table.
import type * as z from "zod/mini";
import { CALLER_CODES, StorageError } from "./errors.ts";
import { type MethodName, type Params, type Result, paramsSchema, resultSchema } from "./interface.ts";
import { parseWireJson, stringifyWireJson } from "./json.ts";
import { ZVolume, ZVolumes } from "./types.ts";
import { isCanonicalVolume, isCanonicalVolumeList } from "./volume-fast-path.ts";
import { wireTypeName } from "./wire.ts";

/**
 * "volumes[2].virtual_size: expected int64, got "x"" — one line per problem, naming the field. `root` names
 * the value itself (a result's type), so a path that starts with an index still says what it indexes.
 */
export function describeIssues(error: z.core.$ZodError, root = ""): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.reduce<string>(
        (acc, part) => (typeof part === "number" ? `${acc}[${part}]` : acc === "" ? String(part) : `${acc}.${String(part)}`),
        root,
      );
      return path === "" ? issue.message : `${path}: ${issue.message}`;
    })
    .join("; ");
}

/** Validates call parameters (already parsed JSON or text); INCORRECT_PARAMETERS names the bad field. */
export function decodeParams<M extends MethodName>(method: M, input: unknown): Params<M> {
  const value = typeof input === "string" ? parseOrThrow(input, CALLER_CODES.incorrectParameters, method) : input;
  const parsed = paramsSchema(method).safeParse(value);
  if (!parsed.success) {
    throw new StorageError(CALLER_CODES.incorrectParameters, [method, describeIssues(parsed.error)]);
  }
  return parsed.data;
}

export function encodeParams<M extends MethodName>(method: M, params: Params<M>): string {
  return stringifyWireJson(decodeParams(method, params));
}

/** Validates what a plugin returned; the error names the plugin, the method and the field. */
/** Results the schema would give back unchanged, checked without it (volume-fast-path.ts). */
const canonical = new Map<z.ZodMiniType, (value: unknown) => boolean>([
  [ZVolumes, isCanonicalVolumeList],
  [ZVolume, isCanonicalVolume],
]);

export function decodeResult<M extends MethodName>(method: M, input: unknown, plugin: string): Result<M> {
  const schema = resultSchema(method);
  if (canonical.get(schema)?.(input) === true) return input as Result<M>;
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const problems = describeIssues(parsed.error, wireTypeName(schema));
    throw new StorageError(
      CALLER_CODES.invalidResult,
      [plugin, method, problems],
      `plugin ${plugin} returned an invalid result for ${method}: ${problems}`,
    );
  }
  return parsed.data;
}

/** The wire form of a result, checked against the method's result type before it leaves. */
export function encodeResult<M extends MethodName>(method: M, result: Result<M>): string {
  const schema = resultSchema(method);
  if (canonical.get(schema)?.(result) === true) return stringifyWireJson(result);
  const parsed = schema.safeParse(result);
  if (!parsed.success) throw new Error(`${method} produced an invalid result: ${describeIssues(parsed.error, wireTypeName(schema))}`);
  return stringifyWireJson(parsed.data);
}

function parseOrThrow(text: string, code: string, method: string): unknown {
  try {
    return parseWireJson(text);
  } catch (error) {
    throw new StorageError(code, [method, `not valid JSON: ${(error as Error).message}`]);
  }
}
