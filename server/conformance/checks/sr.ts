// SR.*: the life of an SR. The setup checks create and attach the SR every later check uses; the
// teardown checks, run last, detach and destroy it.
import { randomUUID } from "node:crypto";
import { type Check, check } from "../check.ts";
import type { CheckContext } from "../context.ts";
import { Failure, expect, expectEqual, expectError, show } from "../expect.ts";
import type { Suite, SrUnderTest } from "../suite.ts";

const SR_NAME = "hangar conformance";
const SR_DESCRIPTION = "created by hangar conformance; safe to destroy";
/** Labels a real administrator might type: non-ASCII, quotes, a newline. */
const NEW_NAME = `Hangar «conformance» "SR" 'été' ✓`;
const NEW_DESCRIPTION = "line one\nline two — ünïcødé 🚀 \\ back\\slash";
/** Why the detached-SR checks only advise (compat-notes §1): a stateless plugin need not track attachment. */
const TOOLSTACK_GUARDS_DETACHED = "the toolstack answers Sr_not_attached itself and never asks a plugin about a detached SR";

export const srSetupChecks: Check[] = [
  check("SR.probe answers probe results for the configuration", { features: ["SR_PROBE"] }, async (t) => {
    // The result type (configuration, complete, sr, extra_info) is enforced by the client.
    await t.call("SR.probe", { configuration: t.suite.configuration });
  }),

  check("SR.create answers a configuration that SR.attach accepts", { features: ["SR_CREATE", "SR_ATTACH"] }, async (t) => {
    const uuid = randomUUID();
    const configuration = await t.call("SR.create", { uuid, configuration: t.suite.configuration, name: SR_NAME, description: SR_DESCRIPTION });
    const sr: SrUnderTest = { configuration, sr: "", uuid, name: SR_NAME, description: SR_DESCRIPTION, attached: false, destroyed: false };
    t.suite.sr = sr;
    t.suite.cleanup.defer("remove the suite's SR", () => removeSr(t.suite, sr));
    sr.sr = await t.call("SR.attach", { configuration });
    sr.attached = true;
    expect(sr.sr !== "", "SR.attach answered an empty SR");
  }),

  check("SR.attach twice answers the same SR", { features: ["SR_ATTACH"], needs: ["sr"] }, async (t) => {
    const again = await t.call("SR.attach", { configuration: suiteSr(t).configuration });
    expectEqual(again, t.sr, "second SR.attach");
  }),

  check("SR.stat: the uuid, name and description given to SR.create, free ≤ total, Healthy", { needs: ["sr"] }, async (t) => {
    const sr = suiteSr(t);
    const stat = await t.call("SR.stat", { sr: sr.sr });
    expectEqual(stat.sr, sr.sr, "sr");
    // The spec asks for the uuid passed in "if it can be persisted": absent is allowed, another one is not.
    if (stat.uuid !== undefined) expectEqual(stat.uuid, sr.uuid, "uuid");
    expectEqual(stat.name, sr.name, "name");
    expectEqual(stat.description, sr.description, "description");
    expect(stat.total_space >= 0 && stat.free_space >= 0, `negative space: free ${stat.free_space}, total ${stat.total_space}`);
    expect(stat.free_space <= stat.total_space, `free_space ${stat.free_space} > total_space ${stat.total_space}`);
    expectEqual(stat.health[0], "Healthy", "health");
  }),

  check("SR.set_name and SR.set_description show in SR.stat", { needs: ["sr"], optional: ["SR.set_name", "SR.set_description"] }, async (t) => {
    const sr = suiteSr(t);
    await t.call("SR.set_name", { sr: sr.sr, new_name: NEW_NAME });
    sr.name = NEW_NAME;
    await t.call("SR.set_description", { sr: sr.sr, new_description: NEW_DESCRIPTION });
    sr.description = NEW_DESCRIPTION;
    const stat = await t.call("SR.stat", { sr: sr.sr });
    expectEqual(stat.name, NEW_NAME, "name after SR.set_name");
    expectEqual(stat.description, NEW_DESCRIPTION, "description after SR.set_description");
  }),

  check("SR.ls of a new SR is empty", { features: ["SR_SCAN"], needs: ["sr"] }, async (t) => {
    const volumes = await t.call("SR.ls", { sr: t.sr });
    expect(volumes.length === 0, `SR.ls lists ${volumes.length} volume(s): ${show(volumes.map((v) => v.key))}`);
  }),
];

export const srTeardownChecks: Check[] = [
  check("SR.detach twice succeeds", { features: ["SR_DETACH"], needs: ["sr"] }, async (t) => {
    const sr = suiteSr(t);
    await t.call("SR.detach", { sr: sr.sr });
    sr.attached = false;
    await t.call("SR.detach", { sr: sr.sr });
  }),

  check("SR.stat, SR.ls and Volume.create fail on a detached SR", { features: ["SR_DETACH"], needs: ["sr"], advisory: TOOLSTACK_GUARDS_DETACHED }, async (t) => {
    const sr = await detached(t);
    const calls: [string, () => Promise<unknown>][] = [["SR.stat", () => t.call("SR.stat", { sr: sr.sr })]];
    if (t.hasFeature("SR_SCAN")) calls.push(["SR.ls", () => t.call("SR.ls", { sr: sr.sr })]);
    if (t.hasFeature("VDI_CREATE")) {
      // A volume made anyway goes with the SR at the end of the run.
      calls.push(["Volume.create", () => t.call("Volume.create", { sr: sr.sr, name: "on a detached SR", description: "", size: 1024 * 1024, sharable: false })]);
    }
    const problems: string[] = [];
    for (const [method, call] of calls) {
      await expectError(call(), `${method} on the detached SR`).catch((error: unknown) => {
        if (!(error instanceof Failure)) throw error;
        problems.push(error.message);
      });
    }
    expect(problems.length === 0, problems.join("; "));
  }),

  check("SR.destroy of a detached SR fails with Sr_not_attached", { features: ["SR_DETACH", "SR_DELETE"], needs: ["sr"], advisory: TOOLSTACK_GUARDS_DETACHED }, async (t) => {
    const sr = await detached(t);
    const destroy = t.call("SR.destroy", { sr: sr.sr }).then(async (result) => {
      sr.destroyed = true;
      // A toolstack would not have let the SR go: make it again, detached, for the checks after this one.
      if (t.hasFeature("SR_CREATE")) {
        sr.configuration = await t.call("SR.create", { uuid: sr.uuid, configuration: t.suite.configuration, name: sr.name, description: sr.description });
        sr.destroyed = false;
      }
      return result;
    });
    await expectError(destroy, "SR.destroy of a detached SR", "Sr_not_attached");
  }),

  check("SR.destroy deletes the SR's volumes", { features: ["SR_ATTACH", "SR_DELETE", "VDI_CREATE"], needs: ["sr"] }, async (t) => {
    const sr = suiteSr(t);
    if (sr.destroyed) t.skip("the SR is already gone");
    if (!sr.attached) {
      sr.sr = await t.call("SR.attach", { configuration: sr.configuration });
      sr.attached = true;
    }
    const volume = await t.call("Volume.create", { sr: sr.sr, name: "left for SR.destroy", description: "", size: 1024 * 1024, sharable: false });
    await t.call("SR.destroy", { sr: sr.sr });
    sr.attached = false;
    sr.destroyed = true;
    // Attaching the same configuration may fail (the SR is gone) or give an SR without the volume.
    let again: string;
    try {
      again = await t.call("SR.attach", { configuration: sr.configuration });
    } catch {
      return;
    }
    t.defer("destroy the re-attached SR", () => t.call("SR.destroy", { sr: again }));
    await expectError(t.call("Volume.stat", { sr: again, key: volume.key }), `Volume.stat of volume ${volume.key} after SR.destroy`);
    if (t.hasFeature("SR_SCAN")) {
      const left = await t.call("SR.ls", { sr: again });
      expect(left.length === 0, `after SR.destroy, attaching the configuration again lists ${left.length} volume(s)`);
    }
  }),
];

function suiteSr(t: CheckContext): SrUnderTest {
  const sr = t.suite.sr;
  if (sr === undefined) throw new Error("no SR");
  return sr;
}

/** The suite's SR, detached first if a failed check left it attached. */
async function detached(t: CheckContext): Promise<SrUnderTest> {
  const sr = suiteSr(t);
  if (sr.destroyed) t.skip("the SR is already gone");
  if (sr.attached) {
    await t.call("SR.detach", { sr: sr.sr });
    sr.attached = false;
  }
  return sr;
}

/** End of the run: destroy the SR when the plugin can, otherwise leave it detached. */
async function removeSr(suite: Suite, sr: SrUnderTest): Promise<void> {
  if (sr.destroyed) return;
  const { client } = suite.volume;
  const dbg = "hangar conformance: clean-up";
  if (suite.features.has("SR_DELETE")) {
    if (!sr.attached) sr.sr = await client.call("SR.attach", { dbg, configuration: sr.configuration });
    await client.call("SR.destroy", { dbg, sr: sr.sr });
    sr.destroyed = true;
  } else if (sr.attached) {
    await client.call("SR.detach", { dbg, sr: sr.sr });
  }
  sr.attached = false;
}
