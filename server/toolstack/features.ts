// The XenAPI classes beyond the core (sessions, tasks, events, system), each a Feature: its calls, event
// classes and start-up work. The order is the start-up order.
import { hostCalls } from "./calls/host.ts";
import { networkCalls, startNetworks } from "./calls/network.ts";
import { pbdCalls } from "./calls/pbd.ts";
import { poolCalls } from "./calls/pool.ts";
import { findSrRecord, listSrRecords, srCalls, startSrs } from "./calls/sr.ts";
import { vbdCalls } from "./calls/vbd.ts";
import { findVdiRecord, listVdiRecords, vdiCalls } from "./calls/vdi.ts";
import { vifCalls } from "./calls/vif.ts";
import { vmCalls } from "./calls/vm.ts";
import { DATA_TASK_KIND, recoverDataTask } from "./data-tasks.ts";
import { metricsRoute } from "./metrics-service.ts";
import { pluginServiceRoute } from "./plugin-service.ts";
import { registerStoredClasses } from "./objects.ts";
import type { Feature, Toolstack } from "./toolstack.ts";
import { recoverVolumeIntents } from "./volume-intents.ts";
import { TRANSFER_FEATURE } from "./transfer/routes.ts";
import { RBAC_FEATURE } from "./rbac/feature.ts";

/** Registers classes whose records are stored whole for event.from. */
const registerStored = (ts: Toolstack, ...classes: string[]) => registerStoredClasses(ts.events, ts.objects, ...classes);

export const TOOLSTACK_FEATURES: Feature[] = [
  { calls: [...poolCalls, ...hostCalls] },
  {
    calls: networkCalls,
    start: async (ts) => {
      registerStored(ts, "network");
      await startNetworks(ts);
    },
  },
  {
    calls: [...srCalls, ...pbdCalls],
    start: async (ts) => {
      registerStored(ts, "PBD");
      ts.events.registerClass("SR", () => listSrRecords(ts), () => ts.objects.count("SR"), (ref) => findSrRecord(ts, ref));
      await startSrs(ts);
    },
  },
  {
    calls: vdiCalls,
    start: async (ts) => {
      // Counted by their locators: listing would run an SR.ls per SR for every event.from answer.
      const countVdis = async () => Number((await ts.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM vdi_locations"))?.n ?? 0);
      ts.events.registerClass("VDI", () => listVdiRecords(ts), countVdis, (ref) => findVdiRecord(ts, ref));
      ts.tasks.registerRecovery(DATA_TASK_KIND, (ref, record) => recoverDataTask(ts, ref, record));
      await recoverVolumeIntents(ts);
    },
  },
  { calls: [...vmCalls, ...vbdCalls, ...vifCalls], start: async (ts) => registerStored(ts, "VM", "VBD", "VIF") },
  TRANSFER_FEATURE,
  { calls: [], routes: { "/plugins": pluginServiceRoute, "/plugins/*": pluginServiceRoute, "/metrics/*": metricsRoute } },
  RBAC_FEATURE,
];
