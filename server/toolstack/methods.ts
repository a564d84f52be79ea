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
import { audited, errorCode } from "./rbac/audit.ts";
import { auditArgs } from "./rbac/audit-args.ts";
import { authorize, ownerOf } from "./rbac/authorize.ts";
import { ruledRole } from "./rbac/call-roles.ts";
import { permissionOf, type Role } from "./rbac/roles.ts";

export interface CallContext {
  ts: Toolstack;
  /** The caller's session (null only for calls that take none). */
  session: Session | null;
  /** Set when the call runs as an `Async.` task. */
  task?: TaskControl;
  /** The caller's address, as the connection shows it ("" when not over the network). */
  client: string;
}

type ParamSpec = readonly [name: string, schema: z.ZodType];
type Args<P extends readonly ParamSpec[]> = { [K in keyof P]: P[K] extends readonly [string, infer S extends z.ZodType] ? z.output<S> : never };
// Optional trailing parameters arrive as undefined; handlers that declare `optional` check for it.

export interface MethodDef {
  name: string;
  /** Whether the first parameter is a session ref (all but login and system.listMethods). */
  session: boolean;
  /** The least role a caller needs (null: a call without a session, which anyone may make). */
  role: Role | null;
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
  /** The least role the call needs, when xapi's rules (rbac/call-roles.ts) do not say: Hangar's own calls. */
  role?: Role;
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
  const session = options.session ?? true;
  const role = session ? (options.role ?? ruledRole(name)) : null;
  if (role === undefined) throw new Error(`${name}: no role for it in rbac/call-roles.ts: declare the role it needs`);
  return {
    name,
    session,
    role,
    params,
    async: options.async ?? !/^session\.|\.(get_|login|logout|listMethods)/.test(name),
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

  all(): MethodDef[] {
    return [...this.#methods.values()];
  }

  /** Every callable name, `Async.` variants included, as system.listMethods answers. */
  names(): string[] {
    const names = [...this.#methods.values()].flatMap((def) => (def.async ? [def.name, `Async.${def.name}`] : [def.name]));
    return names.sort();
  }
}

/** Runs one call as a client made it; any failure is thrown as a XenApiError. `client`: the caller's address. */
export async function invoke(ts: Toolstack, name: string, params: readonly unknown[], client = ""): Promise<XenValue> {
  const asyncCall = name.startsWith("Async.");
  const def = ts.methods.get(asyncCall ? name.slice("Async.".length) : name);
  if (def === undefined || (asyncCall && !def.async)) throw xenErrors.methodUnknown(name);
  const expected = def.params.length + (def.session ? 1 : 0);
  if (params.length > expected || params.length < expected - def.optional) throw xenErrors.parameterCountMismatch(name, expected, params.length);
  const session = def.session ? await ts.sessions.check(params[0]) : null;
  const given = def.session ? params.slice(1) : params;
  const names = def.params.map(([field]) => field);
  // Before the arguments are read: a caller without the role learns nothing of them.
  if (session !== null) {
    try {
      authorize(session, permissionOf(def.name), def.role!);
    } catch (error) {
      if (audited(def.name)) await ts.audit.record({ session, client, kind: "API", action: def.name, args: await auditArgs(ts, def.name, names, given), decision: "DENIED" });
      throw error;
    }
  }
  const args = def.params.map(([field, schema], i) => {
    if (i >= given.length) return undefined;
    const parsed = schema.safeParse(given[i]);
    if (!parsed.success) throw xenErrors.fieldTypeError(field);
    return parsed.data;
  });
  const host = await def.runsOn?.(ts, args);
  const here = host === undefined || host === ts.host.ref;
  // A call forwarded to another host is audited there, where it runs.
  const trail = session !== null && here && audited(def.name) ? { session, client, kind: "API" as const, action: def.name, args: await auditArgs(ts, def.name, names, args) } : undefined;
  if (!here) return forwardCall(ts, host!, def.name, params, asyncCall);
  const ctx: CallContext = { ts, session, client };
  const run = async (task?: TaskControl) => {
    if (trail === undefined) return def.call({ ...ctx, task }, args);
    try {
      const value = await def.call({ ...ctx, task }, args);
      await ts.audit.record({ ...trail, decision: "ALLOWED" });
      return value;
    } catch (error) {
      await ts.audit.record({ ...trail, decision: "ALLOWED", error: errorCode(toXenApiError(error)) });
      throw error;
    }
  };
  if (!asyncCall) return run();
  return ts.tasks.start(`Async.${def.name}`, (task) => run(task), { owner: session === null ? undefined : ownerOf(session) });
}

/** The same, never throwing: the outcome as XenAPI reports it. */
export async function invokeSafely(ts: Toolstack, name: string, params: readonly unknown[], client = ""): Promise<{ ok: true; value: XenValue } | { ok: false; error: ReturnType<typeof toXenApiError> }> {
  try {
    return { ok: true, value: await invoke(ts, name, params, client) };
  } catch (error) {
    return { ok: false, error: toXenApiError(error) };
  }
}
