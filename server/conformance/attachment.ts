// One volume going through the datapath states (open → attach → activate and back), as the toolstack drives
// it for a VM. The check's clean-up releases whatever stage it reached.
import type { Implementation, Volume } from "../storage/types.ts";
import type { CheckContext } from "./context.ts";
import { type Disk, type ImplementationKind, chooseImplementation, openDisk } from "./disk.ts";

/** The domain the suite plays; opaque to plugins. */
const DOMAIN = "0";

type Stage = "closed" | "opened" | "attached" | "activated";

export interface OpenOptions {
  persistent?: boolean;
  domain?: string;
}

export class Attachment {
  readonly uri: string;
  readonly domain: string;
  implementations: Implementation[] = [];
  readonly #t: CheckContext;
  #stage: Stage = "closed";
  #disks: Disk[] = [];

  private constructor(t: CheckContext, uri: string, domain: string) {
    this.#t = t;
    this.uri = uri;
    this.domain = domain;
  }

  static async open(t: CheckContext, uri: string, options: OpenOptions = {}): Promise<Attachment> {
    const attachment = new Attachment(t, uri, options.domain ?? DOMAIN);
    t.defer(`release ${uri}`, () => attachment.release());
    await t.call("Datapath.open", { uri, persistent: options.persistent ?? true });
    attachment.#stage = "opened";
    return attachment;
  }

  async attach(): Promise<Implementation[]> {
    const backend = await this.#t.call("Datapath.attach", { uri: this.uri, domain: this.domain });
    this.implementations = backend.implementations;
    this.#stage = "attached";
    return backend.implementations;
  }

  async activate(): Promise<void> {
    await this.#t.call("Datapath.activate", { uri: this.uri, domain: this.domain });
    this.#stage = "activated";
  }

  async activateReadonly(): Promise<void> {
    await this.#t.call("Datapath.activate_readonly", { uri: this.uri, domain: this.domain });
    this.#stage = "activated";
  }

  /** Opens the volume's bytes through the first usable implementation (`prefer` kinds first). */
  async disk(options: { prefer?: readonly ImplementationKind[]; readOnly?: boolean } = {}): Promise<Disk> {
    const implementation = chooseImplementation(this.implementations, options.prefer);
    if (implementation === undefined) {
      this.#t.skip(`no implementation Hangar can read (${this.implementations.map((i) => i[0]).join(", ") || "none"})`);
    }
    const disk = await openDisk(implementation, { readOnly: options.readOnly });
    this.#disks.push(disk);
    return disk;
  }

  async deactivate(): Promise<void> {
    await this.#closeDisks();
    await this.#t.call("Datapath.deactivate", { uri: this.uri, domain: this.domain });
    this.#stage = "attached";
  }

  async detach(): Promise<void> {
    await this.#t.call("Datapath.detach", { uri: this.uri, domain: this.domain });
    this.#stage = "opened";
  }

  async close(): Promise<void> {
    await this.#t.call("Datapath.close", { uri: this.uri });
    this.#stage = "closed";
  }

  /** Back to closed from any stage; every step is tried, the first error is thrown after the last. */
  async release(): Promise<void> {
    const steps: [Stage, () => Promise<void>][] = [
      ["activated", () => this.deactivate()],
      ["attached", () => this.detach()],
      ["opened", () => this.close()],
    ];
    let firstError: unknown;
    try {
      await this.#closeDisks();
    } catch (error) {
      firstError = error;
    }
    for (const [stage, step] of steps) {
      if (this.#stage !== stage) continue;
      try {
        await step();
      } catch (error) {
        firstError ??= error;
        // Carry on as the toolstack would: a failed deactivate still gets a detach and a close.
        this.#stage = stage === "activated" ? "attached" : stage === "attached" ? "opened" : "closed";
      }
    }
    if (firstError !== undefined) throw firstError;
  }

  async #closeDisks(): Promise<void> {
    const disks = this.#disks.splice(0);
    for (const disk of disks) await disk.close();
  }
}

/** Opens, attaches and activates a volume through the datapath under test. */
export async function plug(t: CheckContext, volume: Volume, options: OpenOptions = {}): Promise<Attachment> {
  const attachment = await Attachment.open(t, await t.datapathUri(volume), options);
  await attachment.attach();
  await attachment.activate();
  return attachment;
}

/** Like plug, but read-only when a plugin has VDI_ACTIVATE_READONLY (snapshots are read-only volumes). */
export async function plugForReading(t: CheckContext, volume: Volume): Promise<Attachment> {
  const attachment = await Attachment.open(t, await t.datapathUri(volume));
  await attachment.attach();
  if (t.hasFeature("VDI_ACTIVATE_READONLY")) await attachment.activateReadonly();
  else await attachment.activate();
  return attachment;
}
