// File SRs for the bench, made and attached through the library (an SR.attach through the plugin would
// also start a datasource daemon, which is not what any row measures).
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { attachSr, createSr, createVolume } from "../../server/plugins/filesr/index.ts";
import { disconnectSr } from "../../server/plugins/filesr/db.ts";
import type { Scratch } from "../workspace.ts";

/** A new attached SR in directory `name` of `parent`; its cached connection is closed with the scratch space. */
export async function createBenchSr(scratch: Scratch, parent: string, name: string): Promise<string> {
  const path = join(parent, name);
  await createSr(path, { uuid: randomUUID(), name: `bench ${name}`, description: "made by npm run bench" });
  await attachSr(path);
  scratch.defer(() => disconnectSr(path));
  return path;
}

export async function createBenchVolume(srPath: string, name: string, size: number): Promise<string> {
  return (await createVolume(srPath, { name, description: "", size })).key;
}
