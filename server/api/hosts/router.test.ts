// The hosts router and the pool-aware storage reads against a real two-host pool (PostgreSQL shared by two
// toolstacks in this process, the console on the master): both hosts live with their SRs, the member's
// volumes read through the member's plugins, then the member stopped: Offline, and its SR refused in words.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { TRPCError } from "@trpc/server";
import { z } from "zod";
import { consoleSampler } from "../../datasources/console-sampler.ts";
import { HEARTBEAT_MS, MASTER_ADDRESS, MEMBER_ADDRESS, startTestPool } from "../pool-testing.ts";
import { createCaller } from "../root.ts";
import { createTRPCContext } from "../trpc.ts";

const MiB = 1024 * 1024;

test("hosts in a pool of two, and the member's SR read through the master", async (t) => {
  const pool = await startTestPool(t);
  const { caller, anonymous, xapi } = pool.console;
  const masterSr = await pool.localSr(pool.master);
  const memberSr = await pool.localSr(pool.member);

  await t.test("refuses an anonymous caller", async () => {
    await assert.rejects(anonymous.hosts.list(), (error: unknown) => error instanceof TRPCError && error.code === "UNAUTHORIZED");
  });

  await t.test("list: both hosts live, the master first, each with its Local storage", async () => {
    const { hosts } = await caller.hosts.list();
    assert.deepEqual(
      hosts.map((h) => [h.address, h.live, h.enabled, h.isMaster, h.isConsoleHost]),
      [
        [MASTER_ADDRESS, true, true, true, true],
        [MEMBER_ADDRESS, true, true, false, false],
      ],
    );
    assert.deepEqual(hosts[0]!.srs.map((sr) => [sr.ref, sr.name, sr.type, sr.attached]), [[masterSr, "Local storage", "file", true]]);
    assert.deepEqual(hosts[1]!.srs.map((sr) => [sr.ref, sr.name, sr.type, sr.attached]), [[memberSr, "Local storage", "file", true]]);
    assert.equal(hosts[0]!.ref, pool.master.ts.host.ref);
    assert.match(hosts[0]!.version ?? "", /^Hangar /);
  });

  await t.test("srs.list: each SR names its host", async () => {
    const { srs } = await caller.srs.list();
    const hostOf = (ref: string) => srs.find((sr) => sr.ref === ref)?.host;
    assert.deepEqual(hostOf(masterSr), { ref: pool.master.ts.host.ref, name: hostOf(masterSr)?.name, address: MASTER_ADDRESS, live: true });
    assert.equal(hostOf(memberSr)?.address, MEMBER_ADDRESS);
    assert.equal(srs.find((sr) => sr.ref === memberSr)?.health.tag, "Healthy");
  });

  let volumeKey = "";
  await t.test("volumes of the member's SR: listed, stat'd and compared through the member's plugins", async () => {
    const vdi = await xapi.call(z.string(), "VDI.create", { SR: memberSr, name_label: "on the member", name_description: "", virtual_size: 4 * MiB, type: "user", sharable: false, read_only: false, other_config: {} });
    const list = await caller.volumes.list({ srRef: memberSr });
    assert.equal(list.sr.ref, memberSr);
    const row = list.volumes.find((v) => v.name === "on the member");
    assert.ok(row, JSON.stringify(list.volumes.map((v) => v.name)));
    assert.equal(row.uuid, await xapi.call(z.string(), "VDI.get_uuid", vdi));
    volumeKey = row.key;
    const stat = await caller.volumes.stat({ srRef: memberSr, key: volumeKey });
    assert.equal(stat.virtualSize, 4 * MiB);
    const snapshot = await xapi.call(z.string(), "VDI.snapshot", vdi, {});
    const snapshotUuid = await xapi.call(z.string(), "VDI.get_uuid", snapshot);
    const snapshotKey = (await caller.volumes.list({ srRef: memberSr })).volumes.find((v) => v.uuid === snapshotUuid)?.key;
    assert.ok(snapshotKey);
    const compare = await caller.volumes.compare({ srRef: memberSr, a: volumeKey, b: snapshotKey });
    assert.equal(compare.changedBlocks, 0);
    // The SR's page: SR.stat from the member's plugin, the count from its SR.ls.
    const page = await caller.srs.get({ sr: memberSr });
    assert.equal(page.source, "plugin");
    assert.equal(page.volumeCount, 2);
    assert.equal(page.host?.address, MEMBER_ADDRESS);
    // The volume is not on the master's SR.
    assert.equal((await caller.volumes.list({ srRef: masterSr })).volumes.some((v) => v.name === "on the member"), false);
  });

  await t.test("the member's SR needs no plugin in the console's own plugin root: its host's are used", async () => {
    const empty = mkdtempSync(join(tmpdir(), "hangar-empty-root-"));
    t.after(() => rmSync(empty, { recursive: true, force: true }));
    const bare = createCaller({ ...createTRPCContext({ headers: pool.console.headers }), pluginRoot: empty });
    assert.ok((await bare.volumes.list({ srRef: memberSr })).volumes.some((v) => v.key === volumeKey));
    await assert.rejects(bare.volumes.list({ srRef: masterSr }), (error: unknown) => error instanceof TRPCError && error.code === "NOT_FOUND" && error.message.includes(empty));
  });

  await t.test("datasources of the member's SR: SR.stat through the member, its files read from the member (GET /metrics/<uid>)", async () => {
    t.after(() => consoleSampler().stop());
    const series = await caller.datasources.series({ srRef: memberSr, rangeSeconds: 300 });
    assert.equal(series.error, null);
    assert.ok(series.t.length >= 1, "the first request has its first sample");
    assert.ok(series.values.free_space![0]! > 0);
  });

  await t.test("the member stopped: listed Offline; its SR Unreachable, its volumes refused in words", async () => {
    await pool.stopMember();
    // A stopped host is marked at once; a dead one after five heartbeats: wait for those too.
    await sleep(HEARTBEAT_MS * 5);
    const { hosts } = await caller.hosts.list();
    assert.deepEqual(hosts.map((h) => [h.address, h.live]), [
      [MASTER_ADDRESS, true],
      [MEMBER_ADDRESS, false],
    ]);
    assert.deepEqual(hosts[1]!.srs.map((sr) => sr.ref), [memberSr]);
    const sr = (await caller.srs.list()).srs.find((s) => s.ref === memberSr)!;
    assert.equal(sr.host?.live, false);
    assert.equal(sr.health.tag, "Unreachable");
    assert.match(sr.health.reason, new RegExp(`host .*${MEMBER_ADDRESS.replaceAll(".", "\\.")}.* is offline`));
    await assert.rejects(caller.volumes.list({ srRef: memberSr }), (error: unknown) => {
      assert.ok(error instanceof TRPCError);
      assert.equal(error.code, "PRECONDITION_FAILED");
      assert.match(error.message, new RegExp(`^The host .*\\(${MEMBER_ADDRESS.replaceAll(".", "\\.")}\\) is offline`));
      return true;
    });
    await assert.rejects(caller.volumes.stat({ srRef: memberSr, key: volumeKey }), /is offline/);
    const page = await caller.srs.get({ sr: memberSr });
    assert.deepEqual([page.source, page.health.tag], ["toolstack", "Unreachable"]);
    // The master's own SR is untouched.
    assert.ok((await caller.volumes.list({ srRef: masterSr })).volumes);
  });
});
