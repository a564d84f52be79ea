// The undoing of volume-making calls the service died in (volume-intents.ts): the service is stopped, and what a
// killed run leaves is made by hand meanwhile (the intent rows in its database, the volumes the plugin made), then
// the next start is looked at. The same through a real kill -9 is the fault matrix's snapshot row.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { after, before, describe, test } from "node:test";
import { createVolume, snapshotVolume } from "../plugins/filesr/index.ts";
import { srOf, volumeKeys } from "./fault-testing.ts";
import { MiB, startTestToolstack, type TestToolstack } from "./storage-testing.ts";

let ts: TestToolstack;
let srRef: string;
let srPath: string;
let hostRef: string;

const call = <T = unknown>(method: string, ...args: unknown[]) => ts.client.call<T>(method, ...args);

/** The run is killed with these intents open; `made` runs while it is down (the plugin's calls committing). */
async function killedWith(intents: Array<{ key: string | null }>, made: () => Promise<void> = async () => {}): Promise<void> {
  await ts.restart(async () => {
    const db = new DatabaseSync(join(ts.dataDir, "toolstack.db"));
    try {
      for (const { key } of intents) {
        db.prepare("INSERT INTO volume_intents (id, host_ref, sr_ref, volume_key, started) VALUES (?, ?, ?, ?, ?)").run(randomUUID(), hostRef, srRef, key, new Date().toISOString());
      }
    } finally {
      db.close();
    }
    await made();
  });
}

const openIntents = () => {
  const db = new DatabaseSync(join(ts.dataDir, "toolstack.db"), { readOnly: true });
  try {
    return (db.prepare("SELECT COUNT(*) AS n FROM volume_intents").get() as { n: number }).n;
  } finally {
    db.close();
  }
};

async function vdiKeys(): Promise<Set<string>> {
  const records = await call<Record<string, { location: string; SR: string }>>("VDI.get_all_records");
  return new Set(Object.values(records).filter((r) => r.SR === srRef).map((r) => r.location));
}

describe("volumes of calls the service was killed in", () => {
  before(async () => {
    ts = await startTestToolstack();
    hostRef = (await call<string[]>("host.get_all"))[0]!;
    srRef = await call<string>("pool.get_default_SR", (await call<string[]>("pool.get_all"))[0]);
    srPath = (await srOf(ts.client, srRef)).path;
  });
  after(() => ts.stop());

  test("a call that completes leaves no intent", async () => {
    const vdi = await call<string>("VDI.create", { SR: srRef, virtual_size: MiB, name_label: "kept" });
    await call("VDI.snapshot", vdi, {});
    await call("VDI.clone", vdi, {});
    assert.equal(openIntents(), 0);
  });

  test("a snapshot committed after the answer was lost is removed; other volumes stay", async () => {
    const source = await call<string>("VDI.create", { SR: srRef, virtual_size: MiB, name_label: "source" });
    const sourceKey = await call<string>("VDI.get_location", source);
    const before = await vdiKeys();
    let made = "";
    // Killed before the plugin answered: the intent has no key; the plugin's snapshot committed.
    await killedWith([{ key: null }], async () => {
      made = (await snapshotVolume(srPath, sourceKey)).key;
    });
    assert.ok(!volumeKeys(srPath).has(made), "the snapshot went");
    assert.deepEqual(await vdiKeys(), before);
    assert.equal(openIntents(), 0);
  });

  test("a volume whose key the run had written down is removed even with its keys set", async () => {
    const vdi = await call<string>("VDI.create", { SR: srRef, virtual_size: MiB, name_label: "answered, never returned" });
    const key = await call<string>("VDI.get_location", vdi);
    await killedWith([{ key }]);
    assert.ok(!volumeKeys(srPath).has(key));
    assert.equal(openIntents(), 0);
  });

  test("an intent whose call made nothing removes nothing", async () => {
    const before = await vdiKeys();
    await killedWith([{ key: null }, { key: "no-such-volume" }]);
    assert.deepEqual(await vdiKeys(), before);
    assert.equal(openIntents(), 0);
  });

  test("more unknown new volumes than interrupted calls: none is taken, they may be someone else's", async () => {
    const made: string[] = [];
    await killedWith([{ key: null }], async () => {
      for (const name of ["one", "two"]) made.push((await createVolume(srPath, { name, description: "", size: MiB })).key);
    });
    const keys = await vdiKeys();
    for (const key of made) assert.ok(keys.has(key), `${key} stays`);
    assert.equal(openIntents(), 0);
  });

  test("a volume a listing has seen is never taken for an interrupted call's", async () => {
    const outside = (await createVolume(srPath, { name: "made beside the toolstack", description: "", size: MiB })).key;
    assert.ok((await vdiKeys()).has(outside));
    await killedWith([{ key: null }]);
    assert.ok((await vdiKeys()).has(outside));
  });
});
