// How the toolstack reaches plugins: the registry of the plugin root (scanned at start, again on demand),
// the volume plugin of an SR type and the datapath plugin for a volume's URIs, exactly as a host's
// toolstack calls them (compat-notes §1).
import { chooseDatapath, defaultPluginRoot, type PluginRegistry, type RegisteredPlugin, type ScanOptions, scanPluginRoot, volumePluginOfType } from "../storage/registry.ts";
import { xenErrors } from "../xenapi/errors.ts";

export class Storage {
  readonly root: string;
  readonly #options: ScanOptions;
  #registry: PluginRegistry | undefined;

  /** `options.timeoutMs` bounds every plugin call (a hung plugin then fails instead of holding a caller). */
  constructor(root = process.env.HANGAR_PLUGIN_ROOT || defaultPluginRoot(), options: ScanOptions = {}) {
    this.root = root;
    this.#options = options;
  }

  async registry(): Promise<PluginRegistry> {
    this.#registry ??= await scanPluginRoot(this.root, this.#options);
    return this.#registry;
  }

  /** Scans the plugin root again (SR.create of a type not seen yet, or an operator's request). */
  async rescan(): Promise<PluginRegistry> {
    this.#registry = await scanPluginRoot(this.root, this.#options);
    return this.#registry;
  }

  /** The volume plugin serving SRs of `type`, or SR_UNKNOWN_DRIVER. */
  async volumePlugin(type: string): Promise<RegisteredPlugin> {
    const plugin = volumePluginOfType(await this.registry(), type) ?? volumePluginOfType(await this.rescan(), type);
    if (plugin === undefined) throw xenErrors.srUnknownDriver(type);
    return plugin;
  }

  /** The datapath plugin for the first of a volume's URIs that one serves. */
  async datapathFor(uris: readonly string[]): Promise<{ plugin: RegisteredPlugin; uri: string }> {
    return chooseDatapath(await this.registry(), uris);
  }
}
