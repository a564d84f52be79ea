// Data.*: copy and mirror to an NBD target the suite serves, and the life of the operations they start.
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import type { Operation, Status, Volume } from "../../storage/types.ts";
import { type Attachment, plug } from "../attachment.ts";
import { type Check, check } from "../check.ts";
import type { CheckContext } from "../context.ts";
import type { Disk } from "../disk.ts";
import { Failure, expect, expectEqual, expectError, show } from "../expect.ts";
import { type NbdTarget, startNbdTarget } from "../nbd-target.ts";
import { AREA_SIZE, type Area, patternBytes, testAreas, writeAreas } from "../pattern.ts";

const needs = ["sr", "datapath", "data"] as const;
const features = ["VDI_CREATE"];
const POLL_MS = 100;
const COPY_TIMEOUT_MS = 60_000;
/** How long a mirrored write or a cancelled operation may take to show. */
const SETTLE_TIMEOUT_MS = 20_000;
const COMPARE_CHUNK = 1024 * 1024;

interface TrackedOperation {
  readonly operation: Operation;
  destroy(): Promise<void>;
  /** The plugin forgot it already (it accepted a Data.destroy it should have refused). */
  forget(): void;
}

/** Makes sure the operation is stopped and forgotten when the check ends. */
function track(t: CheckContext, operation: Operation): TrackedOperation {
  let forgotten = false;
  t.defer(`stop and forget ${show(operation)}`, async () => {
    if (forgotten) return;
    const status = await t.call("Data.stat", { operation });
    if (!status.complete) {
      await t.call("Data.cancel", { operation });
      await waitUntilComplete(t, operation, SETTLE_TIMEOUT_MS, "after Data.cancel");
    }
    await t.call("Data.destroy", { operation });
  });
  return {
    operation,
    async destroy() {
      await t.call("Data.destroy", { operation });
      forgotten = true;
    },
    forget() {
      forgotten = true;
    },
  };
}

async function waitUntilComplete(t: CheckContext, operation: Operation, timeoutMs: number, when: string, onStatus?: (status: Status) => void): Promise<Status> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await t.call("Data.stat", { operation });
    onStatus?.(status);
    if (status.complete) return status;
    if (Date.now() > deadline) throw new Failure(`${show(operation)} is not complete ${timeoutMs / 1000} s ${when}`);
    await sleep(POLL_MS);
  }
}

async function startTarget(t: CheckContext, size: number): Promise<NbdTarget> {
  const target = await startNbdTarget(t.suite.workDir, `target-${randomUUID().slice(0, 8)}`, size);
  t.defer("stop the NBD target", () => target.close());
  return target;
}

/** Fails at the first MiB where the target's bytes differ from the source disk's. */
async function expectSameBytes(source: Disk, target: NbdTarget, size: number): Promise<void> {
  for (let offset = 0; offset < size; offset += COMPARE_CHUNK) {
    const length = Math.min(COMPARE_CHUNK, size - offset);
    const [expected, actual] = await Promise.all([source.read(offset, length), target.read(offset, length)]);
    if (!actual.equals(expected)) throw new Failure(`the target differs from the volume in bytes ${offset}..${offset + length}`);
  }
}

async function waitForTarget(target: NbdTarget, areas: readonly Area[], seed: string): Promise<void> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  for (;;) {
    const arrived = await Promise.all(areas.map(async (area) => (await target.read(area.offset, area.length)).equals(patternBytes(seed, area.offset, area.length))));
    if (arrived.every(Boolean)) return;
    if (Date.now() > deadline) throw new Failure(`${SETTLE_TIMEOUT_MS / 1000} s after the writes, the target still lacks ${arrived.filter((a) => !a).length} of ${areas.length} mirrored areas`);
    await sleep(POLL_MS);
  }
}

interface Mirror {
  volume: Volume;
  source: Attachment;
  target: NbdTarget;
  tracked: TrackedOperation;
}

/** A fresh volume, activated, mirrored to a fresh target. */
async function startMirror(t: CheckContext): Promise<Mirror> {
  const volume = await t.createVolume();
  const source = await plug(t, volume);
  const target = await startTarget(t, volume.virtual_size);
  const operation = await t.call("Data.mirror", { uri: source.uri, domain: source.domain, remote: target.uri });
  const tracked = track(t, operation);
  expectEqual(operation[0], "MirrorV1", "the operation Data.mirror answered");
  return { volume, source, target, tracked };
}

async function cancelAndForget(t: CheckContext, tracked: TrackedOperation): Promise<void> {
  await t.call("Data.cancel", { operation: tracked.operation });
  await waitUntilComplete(t, tracked.operation, SETTLE_TIMEOUT_MS, "after Data.cancel");
  await tracked.destroy();
}

export const dataChecks: Check[] = [
  check("Data.copy copies the listed blocks to an NBD target, with progress in Data.stat", { features, needs }, async (t) => {
    const volume = await t.createVolume();
    const areas = testAreas(volume.virtual_size);
    const source = await plug(t, volume);
    const disk = await source.disk();
    await writeAreas(disk, areas, "copied");
    const target = await startTarget(t, volume.virtual_size);
    const blocklist = { blocksize: AREA_SIZE, ranges: areas.map((area): [number, number] => [area.offset / AREA_SIZE, area.length / AREA_SIZE]) };
    const operation = await t.call("Data.copy", { uri: source.uri, domain: source.domain, remote: target.uri, blocklist });
    const tracked = track(t, operation);
    expectEqual(operation[0], "CopyV1", "the operation Data.copy answered");
    const status = await waitUntilComplete(t, operation, COPY_TIMEOUT_MS, "after Data.copy", ({ progress }) => {
      expect(progress === undefined || (progress >= 0 && progress <= 1), `Data.stat progress is ${progress}, outside 0..1`);
    });
    expect(!status.failed, "Data.stat reports that the copy failed");
    await expectSameBytes(disk, target, volume.virtual_size);
    await tracked.destroy();
  }),

  check("Data.mirror sends writes made after it to the NBD target", { features, needs }, async (t) => {
    const { volume, source, target, tracked } = await startMirror(t);
    const disk = await source.disk({ prefer: ["Nbd"] });
    // Writes to a File or BlockDevice path never pass through the plugin, so it cannot mirror them.
    if (disk.kind !== "Nbd") t.skip(`writes through a ${disk.kind} path bypass the datapath; needs an Nbd implementation`);
    const areas = testAreas(volume.virtual_size);
    await writeAreas(disk, areas, "mirrored");
    await waitForTarget(target, areas, "mirrored");
    await cancelAndForget(t, tracked);
  }),

  check("Data.destroy is refused while the operation is in progress", { features, needs }, async (t) => {
    const { tracked } = await startMirror(t);
    const status = await t.call("Data.stat", { operation: tracked.operation });
    if (status.complete) t.skip("the mirror was complete at once, so no operation in progress could be observed");
    const destroy = t.call("Data.destroy", { operation: tracked.operation }).then((result) => {
      tracked.forget();
      return result;
    });
    await expectError(destroy, "Data.destroy of a running mirror");
    await cancelAndForget(t, tracked);
  }),

  check("Data.ls lists an operation until Data.destroy", { features, needs }, async (t) => {
    const { tracked } = await startMirror(t);
    const listed = await t.call("Data.ls", {});
    expect(listed.some((op) => isDeepStrictEqual(op, tracked.operation)), `Data.ls answers ${show(listed)}, without ${show(tracked.operation)}`);
    await cancelAndForget(t, tracked);
    const after = await t.call("Data.ls", {});
    expect(!after.some((op) => isDeepStrictEqual(op, tracked.operation)), `Data.ls still lists ${show(tracked.operation)} after Data.destroy`);
  }),
];
