// A volume plugged into the toolstack itself through its datapath plugin (open → attach → activate), as a
// data operation needs it, and unplugged again (deactivate → detach → close). Each attachment has a domain
// of its own, so it never disturbs another user of the volume, and can be described in a task's state and
// released by a later run of the service.
import type { Implementation } from "../storage/types.ts";
import { DBG, hasFeature } from "./srs.ts";
import type { Toolstack } from "./toolstack.ts";

export interface Attachment {
  /** The volume URI the datapath plugin serves (its scheme names the plugin). */
  uri: string;
  domain: string;
  /** "ro"/"rw": activated read-only or read-write; "none": attached only (enough for Data.mirror). */
  mode: "ro" | "rw" | "none";
}

/** Plugs the attachment; on failure whatever was done is undone. Answers the datapath's implementations. */
export async function plug(ts: Toolstack, attachment: Attachment): Promise<Implementation[]> {
  const { plugin, uri } = await ts.storage.datapathFor([attachment.uri]);
  const { domain } = attachment;
  try {
    await plugin.client.call("Datapath.open", { dbg: DBG, uri, persistent: true });
    const { implementations } = await plugin.client.call("Datapath.attach", { dbg: DBG, uri, domain });
    if (attachment.mode === "rw" || (attachment.mode === "ro" && !hasFeature(plugin, "VDI_ACTIVATE_READONLY"))) {
      await plugin.client.call("Datapath.activate", { dbg: DBG, uri, domain });
    } else if (attachment.mode === "ro") {
      await plugin.client.call("Datapath.activate_readonly", { dbg: DBG, uri, domain });
    }
    return implementations;
  } catch (error) {
    await unplug(ts, attachment);
    throw error;
  }
}

/** Undoes plug, whatever state it reached; never fails (a volume still attached by others stays open). */
export async function unplug(ts: Toolstack, attachment: Attachment): Promise<void> {
  const step = async (what: string, call: () => Promise<unknown>) => {
    try {
      await call();
    } catch (error) {
      if (what !== "close") console.error(`releasing ${attachment.uri} (${attachment.domain}): ${what}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  let plugin;
  try {
    plugin = (await ts.storage.datapathFor([attachment.uri])).plugin;
  } catch (error) {
    console.error(`releasing ${attachment.uri}: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  const { uri, domain } = attachment;
  if (attachment.mode !== "none") await step("deactivate", () => plugin.client.call("Datapath.deactivate", { dbg: DBG, uri, domain }));
  await step("detach", () => plugin.client.call("Datapath.detach", { dbg: DBG, uri, domain }));
  // Refused while another domain has it attached: it is theirs to close then.
  await step("close", () => plugin.client.call("Datapath.close", { dbg: DBG, uri }));
}
