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

/**
 * Plugs and unplugs of one volume run one at a time in this process, and the volume is closed only by the
 * last of this process's attachments to go: Datapath.open and close are the volume's, not a domain's, and an
 * unplug's close falling between another plug's open and attach left that attach "not open" (an export
 * started while the previous export of the same VM was being released failed so).
 */
const volumeQueues = new Map<string, Promise<void>>();
const pluggedDomains = new Map<string, Set<string>>();

function oneAtATime<T>(uri: string, work: () => Promise<T>): Promise<T> {
  const run = (volumeQueues.get(uri) ?? Promise.resolve()).then(work);
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  volumeQueues.set(uri, tail);
  void tail.then(() => {
    if (volumeQueues.get(uri) === tail) volumeQueues.delete(uri);
  });
  return run;
}

/** Plugs the attachment; on failure whatever was done is undone. Answers the datapath's implementations. */
export function plug(ts: Toolstack, attachment: Attachment): Promise<Implementation[]> {
  return oneAtATime(attachment.uri, async () => {
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
      const domains = pluggedDomains.get(attachment.uri) ?? new Set();
      pluggedDomains.set(attachment.uri, domains.add(domain));
      return implementations;
    } catch (error) {
      await unplugNow(ts, attachment);
      throw error;
    }
  });
}

/** Undoes plug, whatever state it reached; never fails (a volume still attached by others stays open). */
export function unplug(ts: Toolstack, attachment: Attachment): Promise<void> {
  return oneAtATime(attachment.uri, () => unplugNow(ts, attachment));
}

async function unplugNow(ts: Toolstack, attachment: Attachment): Promise<void> {
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
  const domains = pluggedDomains.get(attachment.uri);
  domains?.delete(domain);
  if (domains !== undefined && domains.size > 0) return;
  pluggedDomains.delete(attachment.uri);
  // Refused while another domain (of another process) has it attached: it is theirs to close then.
  await step("close", () => plugin.client.call("Datapath.close", { dbg: DBG, uri }));
}
