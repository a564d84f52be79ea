// Every check, in the order they run: the SR is created by the first SR checks and destroyed by the last.
import type { Check } from "../check.ts";
import { dataChecks } from "./data.ts";
import { datapathChecks } from "./datapath.ts";
import { pluginChecks } from "./plugin.ts";
import { srSetupChecks, srTeardownChecks } from "./sr.ts";
import { volumeDataChecks } from "./volume-data.ts";
import { volumeChecks } from "./volume.ts";

export const CHECKS: readonly Check[] = [
  ...pluginChecks("volume"),
  ...pluginChecks("datapath"),
  ...srSetupChecks,
  ...volumeChecks,
  ...datapathChecks,
  ...volumeDataChecks,
  ...dataChecks,
  ...srTeardownChecks,
];
