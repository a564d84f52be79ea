// The `nbd` datapath plugin: serves volumes of file SRs over NBD, with Data.copy and Data.mirror (methods.ts).
// One dispatcher; every method entry is a symlink to ../../entry.
import { deferPlugin, runScriptEntry } from "../../../storage/dispatcher.ts";
import { datapathQuery } from "../../runtime/datapath-query.ts";
import { INFO } from "./query.ts";

export const plugin = deferPlugin({ "Plugin.query": () => datapathQuery(INFO) }, async () => (await import("./methods.ts")).methods);

if (import.meta.main) await runScriptEntry(plugin, process.argv[2] ?? "");
