// The XenAPI calls as a table: each call names its parameters (zod schemas, after the session ref) and a
// handler. The table drives dispatch for both wire forms, the arity and type errors, `Async.` variants
// (a task runs the handler) and system.listMethods.
import type { z } from "zod";
import type { Session } from "./sessions.ts";
import type { TaskControl } from "./tasks.ts";
import type { Toolstack } from "./toolstack.ts";
import { forwardCall } from "./forward.ts";
import { xenErrors } from "../xenapi/errors.ts";
import { toXenApiError } from "./xenapi-errors.ts";
import type { XenValue } from "../xenapi/values.ts";

export interface CallContext {
  ts: Toolstack;
  /** The caller's session (null only for calls that take none). */
  session: Session | null;
  /** Set when the call runs as an `Async.` task. */
  task?: TaskControl;
}

type ParamSpec = readonly [name: string, schema: z.ZodType];
type Args<P extends readonly ParamSpec[]> = { [K in keyof P]: P[K] extends readonly [string, infer S extends z.ZodType] ? z.output<S> : never };
// Optional trailing parameters arrive as undefined; handlers that declare `optional` check for it.

export interface MethodDef {
  name: string;
  /** Whether the first parameter is a session ref (all but login and system.listMethods). */
  session: boolean;
  params: readonly ParamSpec[];
  /** Whether `Async.<name>` exists (calls that change things). */
  async: boolean;
  /** How many trailing parameters a caller may leave out (they arrive as undefined). */
  optional: number;
  /** The host of the pool that must run the call (undefined: any); another host's gets it forwarded. */
  runsOn?: (ts: Toolstack, args: unknown[]) => Promise<string | undefined>;
  call(ctx: CallContext, args: unknown[]): Promise<XenValue>;
}

export interface MethodOptions {
  session?: boolean;
  async?: boolean;
  optional?: number;
  runsOn?: (ts: Toolstack, args: unknown[]) => Promise<string | undefined>;
}

export function method<const P extends readonly ParamSpec[]>(
  name: string,
  params: P,
  handler: (ctx: CallContext, ...args: Args<P>) => Promise<XenValue | void> | XenValue | void,
  options: MethodOptions = {},
): MethodDef {
  return {
    name,
    session: options.session ?? true,
    params,
    async: options.async ?? !/\.(get_|login|logout|listMethods)/.test(name),
    optional: options.optional ?? 0,
    runsOn: options.runsOn,
    call: async (ctx, args) => (await handler(ctx, ...(args as Args<P>))) ?? "",
  };
}

export class MethodTable {
  readonly #methods = new Map<string, MethodDef>();

  add(...defs: MethodDef[]): this {
    for (const def of defs) this.#methods.set(def.name, def);
    return this;
  }

  get(name: string): MethodDef | undefined {
    return this.#methods.get(name);
  }

  /** Every callable name, `Async.` variants included, as system.listMethods answers. */
  names(): string[] {
    const names = [...this.#methods.values()].flatMap((def) => (def.async ? [def.name, `Async.${def.name}`] : [def.name]));
    return names.sort();
  }
}

/** Runs one call as a client made it; any failure is thrown as a XenApiError. */
export async function invoke(ts: Toolstack, name: string, params: readonly unknown[]): Promise<XenValue> {
  const asyncCall = name.startsWith("Async.");
  const def = ts.methods.get(asyncCall ? name.slice("Async.".length) : name);
  if (def === undefined || (asyncCall && !def.async)) throw xenErrors.methodUnknown(name);
  const expected = def.params.length + (def.session ? 1 : 0);
  if (params.length > expected || params.length < expected - def.optional) throw xenErrors.parameterCountMismatch(name, expected, params.length);
  const session = def.session ? await ts.sessions.check(params[0]) : null;
  const given = def.session ? params.slice(1) : params;
  const args = def.params.map(([field, schema], i) => {
    if (i >= given.length) return undefined;
    const parsed = schema.safeParse(given[i]);
    if (!parsed.success) throw xenErrors.fieldTypeError(field);
    return parsed.data;
  });
  const host = await def.runsOn?.(ts, args);
  if (host !== undefined && host !== ts.host.ref) return forwardCall(ts, host, def.name, params, asyncCall);
  if (!asyncCall) return def.call({ ts, session }, args);
  return ts.tasks.start(`Async.${def.name}`, (task) => def.call({ ts, session, task }, args));
}

/** The same, never throwing: the outcome as XenAPI reports it. */
export async function invokeSafely(ts: Toolstack, name: string, params: readonly unknown[]): Promise<{ ok: true; value: XenValue } | { ok: false; error: ReturnType<typeof toXenApiError> }> {
  try {
    return { ok: true, value: await invoke(ts, name, params) };
  } catch (error) {
    return { ok: false, error: toXenApiError(error) };
  }
}
