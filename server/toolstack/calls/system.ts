// system.listMethods: every call, Async. variants included (xen-api reads the classes from it). Asked with
// or without a session (xen-api's call() adds one), as xapi answers it either way; the session is not needed.
import { method } from "../methods.ts";
import { zString } from "../../xenapi/params.ts";

export const systemCalls = [
  method("system.listMethods", [["session", zString]], ({ ts }) => ts.methods.names(), { session: false, async: false, optional: 1 }),
];
