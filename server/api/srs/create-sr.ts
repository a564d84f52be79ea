// SR.create as a toolstack task (Async.SR.create on the pool's master): the plugin makes and attaches the
// SR; the console waits for the task and answers the new SR, or the plugin's failure in words.
import "server-only";

import { z } from "zod";
import type { XenApiClient } from "../../xenapi/client.ts";
import { readPool } from "./records.ts";
import { runTask } from "./run-task.ts";
import type { TCreateSrResponse } from "./schema.ts";

export async function createSr(
  xapi: XenApiClient,
  input: { type: string; name: string; description: string; deviceConfig: Record<string, string> },
): Promise<TCreateSrResponse> {
  const pool = await readPool(xapi);
  const { task, result } = await runTask(
    xapi,
    "SR.create",
    pool.master,
    input.deviceConfig,
    0, // physical_size: plugins size their SR from the configuration
    input.name,
    input.description,
    input.type,
    "user",
    false,
    {},
  );
  const ref = z.string().startsWith("OpaqueRef:").parse(result);
  const uuid = await xapi.call(z.string(), "SR.get_uuid", ref);
  return { ref, uuid, task };
}
