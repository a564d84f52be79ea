// A real two-host pool for the console's tests: a throwaway PostgreSQL database shared by two toolstacks in
// this process, the master on 127.0.0.2 and a member on 127.0.0.3 (one port, two loopback addresses), each
// with its own data dir and "Local storage" SR, and the console logged in to the master.
import { rmSync } from "node:fs";
import type { TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { freePort } from "../free-port.ts";
import { openPostgres } from "../toolstack/db/postgres.ts";
import { startTestPostgres } from "../toolstack/db/testing.ts";
import { TOOLSTACK_FEATURES } from "../toolstack/features.ts";
import { type RunningToolstack, serveToolstack } from "../toolstack/serve.ts";
import { testHost } from "../toolstack/storage-testing.ts";
import { ROOT_PASSWORD, tempDataDir } from "../toolstack/testing.ts";
import { type ConsoleUnderTest, consoleOn } from "./testing.ts";

export const MASTER_ADDRESS = "127.0.0.2";
export const MEMBER_ADDRESS = "127.0.0.3";
/** Heartbeats of the test pool: a host stopped is taken for dead after five (1 s). */
export const HEARTBEAT_MS = 200;

export interface TestPool {
  master: RunningToolstack;
  member: RunningToolstack;
  masterUrl: string;
  memberUrl: string;
  /** The console on the master. */
  console: Omit<ConsoleUnderTest, "toolstack">;
  /** The "Local storage" SR of a host (its own file SR). */
  localSr(host: RunningToolstack): Promise<string>;
  /** Stops the member (it leaves the pool as a stopped host does). */
  stopMember(): Promise<void>;
}

export async function startTestPool(t: TestContext): Promise<TestPool> {
  // Undone last first: the hosts stop before their database does.
  const undo: Array<() => unknown> = [];
  t.after(async () => {
    for (const step of undo.reverse()) await step();
  });
  const postgres = await startTestPostgres();
  undo.push(() => postgres.stop());
  const url = await postgres.createDatabase();
  // The plugin processes' run and metrics dirs (they inherit the environment): the master's, for both.
  const masterDir = await testHost();
  const memberDir = await tempDataDir();
  // Each host's uuid from its own data dir: one in the environment would make the two hosts one.
  delete process.env.HANGAR_HOST_UUID;
  undo.push(() => {
    masterDir.cleanUp();
    rmSync(memberDir, { recursive: true, force: true });
  });
  const port = await freePort();
  const serve = (address: string, poolRole: "master" | "member", dataDir: string) =>
    serveToolstack({
      port,
      httpsPort: null,
      address,
      hostAddress: address,
      poolRole,
      heartbeatMs: HEARTBEAT_MS,
      dataDir,
      database: openPostgres(url),
      rootPassword: ROOT_PASSWORD,
      features: TOOLSTACK_FEATURES,
    });
  const master = await serve(MASTER_ADDRESS, "master", masterDir.dataDir);
  undo.push(() => master.close());
  let memberRunning = true;
  const member = await serve(MEMBER_ADDRESS, "member", memberDir);
  undo.push(() => memberRunning && member.close());
  const masterUrl = `http://${MASTER_ADDRESS}:${port}`;
  const consoleUnderTest = await consoleOn(masterUrl);
  const xapi = consoleUnderTest.xapi;
  return {
    master,
    member,
    masterUrl,
    memberUrl: `http://${MEMBER_ADDRESS}:${port}`,
    console: consoleUnderTest,
    async localSr(host) {
      const pbds = await xapi.call(z.array(z.string()), "host.get_PBDs", host.ts.host.ref);
      for (const pbd of pbds) {
        const sr = await xapi.call(z.string(), "PBD.get_SR", pbd);
        if ((await xapi.call(z.string(), "SR.get_name_label", sr)) === "Local storage") return sr;
      }
      throw new Error(`no Local storage SR on ${host.ts.host.address}`);
    },
    async stopMember() {
      memberRunning = false;
      await member.close();
      // What a client sees settles within a heartbeat.
      await sleep(HEARTBEAT_MS);
    },
  };
}
