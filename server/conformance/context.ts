// What a running check works with: plugin calls that name the check in `dbg`, the suite's SR, volumes and
// datapath attachments that are released when the check ends, pass or fail.
import { StorageError } from "../storage/errors.ts";
import { type MethodName, type Params, type Result, interfaceOf } from "../storage/interface.ts";
import { type PluginKind, type RegisteredPlugin, chooseDatapath } from "../storage/registry.ts";
import type { Volume } from "../storage/types.ts";
import type { Check } from "./check.ts";
import { CleanupStack } from "./cleanup.ts";
import { CallFailed, Failure, Skip, isUnimplemented } from "./expect.ts";
import type { Suite } from "./suite.ts";

/** Size of the volumes the checks create: big enough for three distinct 64 KiB areas, small enough to copy fast. */
export const VOLUME_SIZE = 4 * 1024 * 1024;

export interface VolumeOptions {
  name?: string;
  description?: string;
  size?: number;
  sharable?: boolean;
}

type CallParams<M extends MethodName> = Omit<Params<M>, "dbg">;

export class CheckContext {
  readonly suite: Suite;
  readonly check: Check;
  readonly cleanup = new CleanupStack();
  /** Volumes this check created and has not destroyed yet. */
  readonly #volumes = new Set<string>();

  constructor(suite: Suite, check: Check) {
    this.suite = suite;
    this.check = check;
  }

  /**
   * Calls the volume plugin, or the datapath plugin for Datapath.* and Data.* (`on` chooses for Plugin.*).
   * A plugin error becomes CallFailed; a missing method skips the check when it is one of its optional
   * methods, and fails it otherwise (the plugin has the feature that promises the method).
   */
  async call<M extends MethodName>(method: M, params: CallParams<M>, on?: PluginKind): Promise<Result<M>> {
    const plugin = this.#pluginFor(method, on);
    try {
      return await plugin.client.call(method, { dbg: `hangar conformance: ${this.check.name}`, ...params } as Params<M>);
    } catch (error) {
      if (!(error instanceof StorageError)) throw error;
      if (isUnimplemented(error)) {
        if (this.check.optional.includes(method)) throw new Skip(`${method} not implemented`);
        throw new Failure(`${method} is not implemented: ${error.message}`);
      }
      throw new CallFailed(method, error);
    }
  }

  #pluginFor(method: MethodName, on: PluginKind | undefined): RegisteredPlugin {
    const iface = interfaceOf(method);
    const kind = on ?? (iface === "Datapath" || iface === "Data" ? "datapath" : "volume");
    if (kind === "volume") return this.suite.volume;
    if (this.suite.datapath === undefined) throw new Error(`${method} needs a datapath plugin`);
    return this.suite.datapath;
  }

  defer(label: string, action: () => Promise<unknown> | unknown): void {
    this.cleanup.defer(label, action);
  }

  skip(reason: string): never {
    throw new Skip(reason);
  }

  /** Whether the plugins under test have the feature, declared or derived (no /N suffix). */
  hasFeature(feature: string): boolean {
    return this.suite.features.has(feature);
  }

  /** The SR the suite created and attached. */
  get sr(): string {
    const sr = this.suite.sr;
    if (sr === undefined || !sr.attached) throw new Failure("the suite's SR is not attached");
    return sr.sr;
  }

  async createVolume(options: VolumeOptions = {}): Promise<Volume> {
    const volume = await this.call("Volume.create", {
      sr: this.sr,
      name: options.name ?? "hangar conformance",
      description: options.description ?? "created by hangar conformance",
      size: options.size ?? VOLUME_SIZE,
      sharable: options.sharable ?? false,
    });
    this.adoptVolume(volume.key);
    return volume;
  }

  /** Destroys the volume when the check ends (snapshots, clones and copies it made too). */
  adoptVolume(key: string): void {
    const sr = this.sr;
    this.#volumes.add(key);
    this.defer(`Volume.destroy ${key}`, async () => {
      if (this.#volumes.delete(key) && this.hasFeature("VDI_DELETE")) await this.call("Volume.destroy", { sr, key });
    });
  }

  async destroyVolume(key: string): Promise<void> {
    await this.call("Volume.destroy", { sr: this.sr, key });
    this.#volumes.delete(key);
  }

  /**
   * The volume's URI for the datapath under test, found as the toolstack finds it when it attaches a volume:
   * from what Volume.stat answers now (not what created the volume), the first URI with a usable scheme.
   */
  async datapathUri(volume: Volume): Promise<string> {
    const datapath = this.suite.datapath;
    if (datapath === undefined) throw new Error("no datapath plugin");
    const { uri } = await this.call("Volume.stat", { sr: this.sr, key: volume.key });
    try {
      return chooseDatapath({ ...this.suite.registry, plugins: [datapath] }, uri).uri;
    } catch {
      throw new Failure(`Volume.stat of ${volume.key} offers no ${datapath.type}: URI (its URIs: ${uri.join(", ") || "none"})`);
    }
  }
}
