// The `file` volume plugin: an SR is a directory on a local filesystem, volumes are sparse files in
// copy-on-write layers (server/plugins/filesr). One dispatcher; every method entry is a symlink to ../../entry.
import { deferPlugin, runScriptEntry } from "../../../storage/dispatcher.ts";
import { QUERY_RESULT } from "./query.ts";

export const plugin = deferPlugin({ "Plugin.query": () => QUERY_RESULT }, async () => (await import("./methods.ts")).methods);

if (import.meta.main) await runScriptEntry(plugin, process.argv[2] ?? "");
