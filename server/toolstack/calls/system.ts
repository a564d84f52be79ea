// system.listMethods: every call, Async. variants included (xen-api reads the classes from it).
import { method } from "../xenapi/methods.ts";

export const systemCalls = [method("system.listMethods", [], ({ ts }) => ts.methods.names(), { session: false, async: false })];
