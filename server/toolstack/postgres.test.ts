// `hangar serve` with HANGAR_DATABASE_URL on a throwaway PostgreSQL cluster: the toolstack's state (pool,
// host, its default SR, users, sessions, tasks, events) lives in PostgreSQL, survives a restart of the
// process, and a URL that is not PostgreSQL's is refused in words.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { z } from "zod";
import { startTestPostgres, type TestPostgres } from "./db/testing.ts";
import { ROOT_PASSWORD, startServeProcess } from "./testing.ts";
import { XenApiClient } from "../xenapi/client.ts";

let cluster: TestPostgres;
before(async () => {
  cluster = await startTestPostgres();
});
after(() => cluster.stop());

test("the toolstack on PostgreSQL: its state is in the database and survives a restart", { timeout: 120_000 }, async (t) => {
  const url = await cluster.createDatabase();
  const dataDir = await mkdtemp(join(tmpdir(), "hangar-pg-host-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startServeProcess(dataDir, { HANGAR_DATABASE_URL: url });
  let client = await XenApiClient.login(first.url, "root", ROOT_PASSWORD, "postgres test");
  const [pool] = await client.call(z.array(z.string()), "pool.get_all");
  const hosts = await client.call(z.array(z.string()), "host.get_all");
  const defaultSr = await client.call(z.string(), "pool.get_default_SR", pool);
  assert.equal(hosts.length, 1);
  const task = await client.call(z.string(), "task.create", "kept in PostgreSQL", "");
  await client.call(z.unknown(), "task.set_progress", task, 0.5);
  const { token } = await client.call(z.object({ token: z.string() }).loose(), "event.from", ["task"], "", 0);
  await first.stop();

  const second = await startServeProcess(dataDir, { HANGAR_DATABASE_URL: url });
  t.after(() => second.stop());
  // The session made before the restart is still good: sessions are rows of the database too.
  client = new XenApiClient(second.url, client.session);
  assert.deepEqual(await client.call(z.array(z.string()), "host.get_all"), hosts);
  assert.equal(await client.call(z.string(), "pool.get_default_SR", pool), defaultSr);
  const record = await client.call(z.object({ name_label: z.string(), progress: z.number() }).loose(), "task.get_record", task);
  assert.equal(record.name_label, "kept in PostgreSQL");
  assert.equal(record.progress, 0.5);
  // Events continue from the token taken before the restart.
  await client.call(z.unknown(), "task.set_progress", task, 0.75);
  const batch = await client.call(z.object({ events: z.array(z.object({ ref: z.string() }).loose()) }).loose(), "event.from", ["task"], token, 5);
  assert.ok(batch.events.some((event) => event.ref === task));
});

test("HANGAR_DATABASE_URL that is not a postgres:// URL is refused in words", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "hangar-pg-host-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await assert.rejects(startServeProcess(dataDir, { HANGAR_DATABASE_URL: "mysql://root:secret@db/hangar" }), /HANGAR_DATABASE_URL must be a postgres:\/\/ URL \(got mysql:\/\/…@db\/hangar\)/);
});
