// What an import or export has made and plugged so far, kept in its task's other_config as it goes, so that
// whatever ends it — failure, cancel, client gone, or the service killed (recovered on the next start) —
// leaves nothing behind: attachments released, and for a failed import its VMs (with their VBDs and VIFs)
// and volumes destroyed.
import { z } from "zod";
import { destroyVm } from "../calls/vm.ts";
import type { Queryable } from "../db/database.ts";
import { type Attachment, unplug } from "../datapath-session.ts";
import { attachedSr, DBG } from "../srs.ts";
import { TASK_KIND_KEY, type TaskControl } from "../tasks.ts";
import type { Toolstack } from "../toolstack.ts";
import { announceChanges } from "../vdi-records.ts";
import { StorageError } from "../../storage/errors.ts";
import { XenApiError } from "../../xenapi/errors.ts";
import type { XenRecord } from "../../xenapi/values.ts";

export const TRANSFER_TASK_KIND = "vm-transfer";
const STATE_KEY = "hangar:vm-transfer";

const ZState = z.object({
  what: z.enum(["import", "export", "disk import"]),
  vms: z.array(z.string()),
  volumes: z.array(z.object({ sr: z.string(), key: z.string() })),
  attachments: z.array(z.object({ uri: z.string(), domain: z.string(), mode: z.enum(["ro", "rw", "none"]) })),
});
type State = z.infer<typeof ZState>;

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

export class TransferState {
  readonly #ts: Toolstack;
  readonly #control: TaskControl | undefined;
  readonly #state: State;

  constructor(ts: Toolstack, control: TaskControl | undefined, what: State["what"], state?: State) {
    this.#ts = ts;
    this.#control = control;
    this.#state = state ?? { what, vms: [], volumes: [], attachments: [] };
  }

  async #save(tx?: Queryable): Promise<void> {
    if (this.#control === undefined) return;
    await this.#control.remember(TASK_KIND_KEY, TRANSFER_TASK_KIND, tx);
    await this.#control.remember(STATE_KEY, JSON.stringify(this.#state), tx);
  }

  async addVm(ref: string): Promise<void> {
    this.#state.vms.push(ref);
    await this.#save();
  }

  /** `tx`: recorded in that transaction (the one that hands the new volume over: volume-intents.ts). */
  async addVolume(sr: string, key: string, tx?: Queryable): Promise<void> {
    this.#state.volumes.push({ sr, key });
    await this.#save(tx);
  }

  async addAttachment(attachment: Attachment): Promise<void> {
    this.#state.attachments.push(attachment);
    await this.#save();
  }

  async released(attachment: Attachment): Promise<void> {
    this.#state.attachments = this.#state.attachments.filter((a) => a.domain !== attachment.domain || a.uri !== attachment.uri);
    await this.#save();
  }

  /** Success: what was made stays; only attachments are forgotten (they were released as each disk ended). */
  async keep(): Promise<void> {
    this.#state.vms = [];
    this.#state.volumes = [];
    await this.#save();
  }

  /** Releases attachments and destroys what was made; each step done once, failures logged, never thrown. */
  async undo(): Promise<void> {
    const ts = this.#ts;
    for (const attachment of this.#state.attachments.reverse()) await unplug(ts, attachment);
    this.#state.attachments = [];
    for (const vm of this.#state.vms) {
      try {
        await destroyVm(ts, vm);
      } catch (error) {
        if (!(error instanceof XenApiError && error.code === "HANDLE_INVALID")) console.error(`removing the half-imported VM ${vm}: ${message(error)}`);
      }
    }
    this.#state.vms = [];
    const srs = new Set<string>();
    for (const { sr: srRef, key } of this.#state.volumes) {
      try {
        const sr = await attachedSr(ts, srRef);
        await sr.plugin.client.call("Volume.destroy", { dbg: DBG, sr: sr.uri, key });
        srs.add(srRef);
      } catch (error) {
        // Already gone: the start's undoing of interrupted volume calls (volume-intents.ts) may have come first.
        if (error instanceof StorageError && error.errorConstructor === "Volume_does_not_exist") continue;
        console.error(`removing the half-imported volume ${key} of SR ${srRef}: ${message(error)}`);
      }
    }
    this.#state.volumes = [];
    for (const sr of srs) await announceChanges(ts, sr);
    await this.#save().catch(() => undefined);
  }
}

/** The task recovery of TRANSFER_TASK_KIND: an import or export the service was killed in is undone, and its task fails. */
export async function recoverTransfer(ts: Toolstack, ref: string, record: XenRecord): Promise<void> {
  const text = (record.other_config as Record<string, string> | undefined)?.[STATE_KEY];
  const parsed = text === undefined ? undefined : ZState.safeParse(JSON.parse(text));
  if (parsed?.success) await new TransferState(ts, undefined, parsed.data.what, parsed.data).undo();
  const what = !parsed?.success ? "the transfer" : parsed.data.what === "disk import" ? "the disk import" : `the VM ${parsed.data.what}`;
  throw new XenApiError("TASK_INTERRUPTED", [ref, `the toolstack restarted during ${what}; what it had made was removed`]);
}
