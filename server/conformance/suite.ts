// What a conformance run shares between its checks: the plugins under test, their features, the SR the
// suite made, its scratch directory and the clean-up of everything it created.
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StorageError } from "../storage/errors.ts";
import { type PluginRegistry, type RegisteredPlugin, featureName } from "../storage/registry.ts";
import type { Configuration } from "../storage/types.ts";
import { CleanupStack } from "./cleanup.ts";
import { isUnimplemented } from "./expect.ts";
import { srConfiguration } from "./sr-config.ts";

export interface SrUnderTest {
  /** What SR.create answered: the configuration SR.attach takes. */
  configuration: Configuration;
  /** What SR.attach answered. */
  sr: string;
  uuid: string;
  name: string;
  description: string;
  attached: boolean;
  destroyed: boolean;
}

export interface Suite {
  readonly registry: PluginRegistry;
  readonly volume: RegisteredPlugin;
  /** The datapath plugin of --datapath, when it is registered. */
  readonly datapath: RegisteredPlugin | undefined;
  /** Why the datapath checks cannot run (no --datapath, plugin not registered). */
  readonly datapathMissing: string | undefined;
  /** Whether the datapath plugin has Data.* (Data.ls did not answer Unimplemented). */
  readonly dataImplemented: boolean;
  /** Effective features (declared or derived) of the volume and datapath plugins, without /N suffixes. */
  readonly features: ReadonlySet<string>;
  /** The configuration SR.probe and SR.create get. */
  readonly configuration: Configuration;
  /** A directory of the suite's own: SR directory, NBD sockets, target files. */
  readonly workDir: string;
  readonly cleanup: CleanupStack;
  sr: SrUnderTest | undefined;
}

export interface SuitePlugins {
  registry: PluginRegistry;
  volume: RegisteredPlugin;
  datapath: RegisteredPlugin | undefined;
  datapathMissing: string | undefined;
}

/** Prepares a run; the caller must `await suite.cleanup.run()` whatever happens next. */
export async function openSuite(plugins: SuitePlugins, givenConfiguration: Configuration | undefined): Promise<Suite> {
  const cleanup = new CleanupStack();
  const workDir = await mkdtemp(join(tmpdir(), "hangar-conformance-"));
  cleanup.defer(`remove ${workDir}`, () => rm(workDir, { recursive: true, force: true }));
  try {
    const srDir = join(workDir, "sr");
    await mkdir(srDir);
    const configuration = srConfiguration(plugins.volume.query.configuration, givenConfiguration, srDir);
    const features = [...plugins.volume.features, ...(plugins.datapath?.features ?? [])];
    return {
      ...plugins,
      dataImplemented: plugins.datapath !== undefined && (await hasDataInterface(plugins.datapath)),
      features: new Set(features.map(featureName)),
      configuration,
      workDir,
      cleanup,
      sr: undefined,
    };
  } catch (error) {
    await cleanup.run();
    throw error;
  }
}

async function hasDataInterface(datapath: RegisteredPlugin): Promise<boolean> {
  try {
    await datapath.client.call("Data.ls", { dbg: "hangar conformance: does the datapath implement Data.*?" });
    return true;
  } catch (error) {
    // Any other failure means Data.ls exists and misbehaves: the Data checks will say how.
    return !(error instanceof StorageError && isUnimplemented(error));
  }
}
