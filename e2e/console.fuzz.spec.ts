// The console's own routes, fuzzed over HTTP against the production build (issue 22): every tRPC procedure of
// the root router with generated and mangled inputs, the tus upload endpoint with generated requests, and the
// export download route with generated Range headers. Each case must end in a success or a clean error (a 4xx,
// never a 500) within its time bound, the console answering a probe meanwhile, its RSS bounded, and nothing
// left behind: no object made in the toolstack, no task left running, no upload half-made, no spool
// incomplete. Seeded and bounded (server/fuzz-testing.ts): `npm test` runs a short deterministic slice;
// HANGAR_FUZZ=full the full budget; HANGAR_FUZZ_SEED=<n> replays a failure's run.
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { APIRequestContext, Browser } from "@playwright/test";
import fc from "fast-check";
import { z } from "zod";
import { toolstackPort } from "../playwright.config.ts";
import { collect, http, MiB, patternBlock, testXva } from "../server/toolstack/transfer/testing.ts";
import { XenApiClient } from "../server/xenapi/client.ts";
import { CONSOLE_PROCEDURES, type ConsoleProcedure } from "./console-fuzz-procedures.ts";
import { PACKAGE_SNIFF_BYTES } from "../lib/file-kind.ts";
import { tarHeader } from "../lib/tar-pack.ts";
import { applyEdit, editArbitrary, eventually, FUZZ_FULL, type FuzzBudget, fuzzConsole, headerText, type J, jsonText, listenerPid, mapStrings, mib, Raw, rssOf, toJ, weirdString, weirdValue } from "./console-fuzz.ts";
import { E2E_PASSWORD, expect, logIn, anonymousTest as test } from "./fixtures.ts";
import { spoolDir } from "./transfer-helpers.ts";

test.describe.configure({ mode: "serial" });

const toolstackUrl = `http://127.0.0.1:${toolstackPort}`;
const exportsDir = () => join(process.env.HANGAR_E2E_DATA_DIR ?? "", "transfers", "exports");

/** Per target: the slice's cases (`npm test`), the full run's at most and its time, one case's bound. */
const TRPC: FuzzBudget = { slice: 30, full: 4000, fullSeconds: 120, caseMs: 15_000 };
const TUS: FuzzBudget = { slice: 25, full: 2000, fullSeconds: 120, caseMs: 20_000 };
const DOWNLOADS: FuzzBudget = { slice: 12, full: 1000, fullSeconds: 120, caseMs: 20_000 };
/** One HTTP request of a case may take this long. */
const REQUEST_MS = 12_000;
const testTimeout = (budget: FuzzBudget) => (FUZZ_FULL ? budget.fullSeconds * 1000 + 180_000 : 150_000);

// Refs and names that exist nowhere: what a destructive mutation is given instead of a real object's.
const FAKE_REF = "OpaqueRef:f022f022-0000-4000-8000-000000000001";
const FAKE_REF2 = "OpaqueRef:f022f022-0000-4000-8000-000000000002";
const FAKE_UUID = "f022f022-0000-4000-8000-000000000003";
const FAKE_TYPE = "fuzz-no-such-type";
const REDACTED = "fuzz-redacted";

/** What the run found in setup: the session cookies, the toolstack's objects, the console's pid. */
interface World {
  api: APIRequestContext;
  /** `hangar_session=…` of root. */
  cookie: string;
  /** The cookie of a session logged out since (the toolstack says SESSION_INVALID). */
  endedCookie: string;
  xapi: XenApiClient;
  vm: { ref: string; uuid: string; name: string };
  sr: { ref: string; uuid: string };
  volumes: { key: string; uuid: string }[];
  volumePlugin: string;
  /** Strings a mutation must never carry: real refs, uuids, keys, plugin and SR type names. */
  protectedStrings: string[];
  consolePid: number | undefined;
}

let world: World;

async function trpcData(api: APIRequestContext, cookie: string, path: string, input?: unknown): Promise<unknown> {
  const query = input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify(input))}`;
  const answer = await api.get(`/api/trpc/${path}${query}`, { headers: { cookie } });
  expect(answer.status(), `${path}: ${await answer.text()}`).toBe(200);
  return ((await answer.json()) as { result: { data: unknown } }).result.data;
}

/** A login through the real form: the session cookie, and the way out (logOut ends the toolstack session; close keeps it). */
async function sessionCookie(browser: Browser, baseURL: string): Promise<{ cookie: string; logOut: () => Promise<void>; close: () => Promise<void> }> {
  const context = await browser.newContext({ baseURL });
  const page = await context.newPage();
  await logIn(page);
  const value = (await context.cookies()).find((c) => c.name === "hangar_session")!.value;
  return {
    cookie: `hangar_session=${value}`,
    logOut: async () => {
      await page.getByRole("button", { name: "Log out" }).click();
      // (A poll of the page's that meets the session just ended may send it there as "expired" first.)
      await expect(page).toHaveURL(/\/login(\?.*)?$/);
      await context.close();
    },
    close: () => context.close(),
  };
}

test.beforeAll(async ({ browser, playwright }) => {
  test.setTimeout(120_000);
  const baseURL = test.info().project.use.baseURL!;
  const api = await playwright.request.newContext({ baseURL });
  const [root, ended] = await Promise.all([sessionCookie(browser, baseURL), sessionCookie(browser, baseURL)]);
  await Promise.all([root.close(), ended.logOut()]);

  // A small VM to export (one 1 MiB block of data on a 2 MiB disk), imported through the toolstack's /import.
  const xapi = await XenApiClient.login(toolstackUrl, "root", E2E_PASSWORD, "hangar-e2e-fuzz");
  const name = `e2e-fuzz-${Date.now()}`;
  const archive = await collect(testXva({ name, disks: [{ size: 2 * MiB, blocks: new Map([[0, patternBlock(22)]]) }] }));
  const imported = await http(`${toolstackUrl}/import?session_id=${xapi.session}`, { method: "PUT", body: archive, headers: { "content-length": String(archive.length) } });
  expect(imported.status).toBe(200);
  const [vmRef] = await xapi.call(z.array(z.string()), "VM.get_by_name_label", name);
  const vmUuid = await xapi.call(z.string(), "VM.get_uuid", vmRef);

  const { srs } = z.object({ srs: z.array(z.object({ ref: z.string(), uuid: z.string(), type: z.string(), isDefault: z.boolean(), attached: z.boolean() })) }).parse(await trpcData(api, root.cookie, "srs.list", { volumeCounts: false }));
  const sr = srs.find((s) => s.isDefault && s.attached) ?? srs.find((s) => s.attached)!;
  const { volumes } = z.object({ volumes: z.array(z.object({ key: z.string(), uuid: z.string() })) }).parse(await trpcData(api, root.cookie, "volumes.list", { srRef: sr.ref }));
  const { plugins } = z.object({ plugins: z.array(z.object({ kind: z.string(), dir: z.string(), type: z.string(), name: z.string() })) }).parse(await trpcData(api, root.cookie, "plugins.list"));
  const { types } = z.object({ types: z.array(z.object({ type: z.string(), name: z.string() })) }).parse(await trpcData(api, root.cookie, "srs.types"));
  const vdis = await xapi.records("VDI", z.looseObject({ uuid: z.string(), location: z.string().optional() }));
  const hosts = await xapi.call(z.array(z.string()), "host.get_all");

  const protectedStrings = [
    vmRef!,
    vmUuid,
    ...srs.flatMap((s) => [s.ref, s.uuid]),
    ...volumes.flatMap((v) => [v.key, v.uuid]),
    ...Object.entries(vdis).flatMap(([ref, v]) => [ref, v.uuid, ...(v.location === undefined || v.location === "" ? [] : [v.location])]),
    ...hosts,
    ...plugins.flatMap((p) => [p.dir, p.type, p.name]),
    ...types.flatMap((t) => [t.type, t.name]),
  ].filter((s) => s.trim().length >= 2);

  const port = Number(new URL(baseURL).port);
  world = {
    api,
    cookie: root.cookie,
    endedCookie: ended.cookie,
    xapi,
    vm: { ref: vmRef!, uuid: vmUuid, name },
    sr: { ref: sr.ref, uuid: sr.uuid },
    volumes,
    volumePlugin: plugins.find((p) => p.kind === "volume" && p.type === sr.type)?.dir ?? sr.type,
    protectedStrings,
    consolePid: listenerPid(port),
  };
  console.log(`console fuzz: console pid ${world.consolePid ?? "not found"}, RSS ${mib(rssOf(world.consolePid))}; VM ${vmUuid}, SR ${sr.ref}, ${volumes.length} volumes`);
});

test.afterAll(async () => {
  if (world === undefined) return;
  // The VM and its disks (VM.destroy leaves the disks).
  const vbds = await world.xapi.call(z.array(z.string()), "VM.get_VBDs", world.vm.ref).catch(() => [] as string[]);
  const vdis = await Promise.all(vbds.map((vbd) => world.xapi.call(z.string(), "VBD.get_VDI", vbd).catch(() => "OpaqueRef:NULL")));
  await world.xapi.call(z.unknown(), "VM.destroy", world.vm.ref).catch(() => undefined);
  for (const vdi of vdis) if (vdi !== "OpaqueRef:NULL") await world.xapi.call(z.unknown(), "VDI.destroy", vdi).catch(() => undefined);
  await world.xapi.logout();
  await world.api.dispose();
  console.log(`console fuzz: console RSS at the end ${mib(rssOf(world.consolePid))}`);
});

// ---- what a case may leave behind ----

const ZTask = z.looseObject({ status: z.string(), name_label: z.string() });

interface ToolstackState {
  vms: string[];
  vdis: string[];
  srs: string[];
  tasks: Record<string, z.infer<typeof ZTask>>;
}

async function toolstackState(): Promise<ToolstackState> {
  const [vms, vdis, srs, tasks] = await Promise.all([
    world.xapi.call(z.array(z.string()), "VM.get_all"),
    world.xapi.call(z.array(z.string()), "VDI.get_all"),
    world.xapi.call(z.array(z.string()), "SR.get_all"),
    world.xapi.records("task", ZTask),
  ]);
  return { vms: vms.sort(), vdis: vdis.sort(), srs: srs.sort(), tasks };
}

const pending = (state: ToolstackState) => Object.entries(state.tasks).filter(([, task]) => task.status === "pending" || task.status === "cancelling");

/**
 * The toolstack as it was before the case (VMs, VDIs and SRs the same; no task of the case still running),
 * within `ms`; then the case's finished tasks are removed from the history (tidy, not a check).
 */
async function expectToolstackAsBefore(before: ToolstackState, ms: number, allowedPending: ReadonlySet<string> = new Set()): Promise<void> {
  let now = before;
  await eventually(ms, async () => {
    now = await toolstackState();
    for (const kind of ["vms", "vdis", "srs"] as const) {
      const added = now[kind].filter((ref) => !before[kind].includes(ref));
      const removed = before[kind].filter((ref) => !now[kind].includes(ref));
      if (added.length > 0 || removed.length > 0) return `the case changed the toolstack's ${kind}: added ${added.join(", ") || "none"}, removed ${removed.join(", ") || "none"}`;
    }
    const running = pending(now).filter(([ref]) => before.tasks[ref] === undefined && !allowedPending.has(ref));
    if (running.length > 0) return `the case left tasks running: ${running.map(([ref, t]) => `${t.name_label} (${ref})`).join(", ")}`;
    return undefined;
  });
  for (const ref of Object.keys(now.tasks)) if (before.tasks[ref] === undefined && !allowedPending.has(ref)) await world.xapi.call(z.unknown(), "task.destroy", ref).catch(() => undefined);
}

const listDir = (dir: string) => readdir(dir).catch(() => [] as string[]);

// ---- requests ----

type Auth = "session" | "none" | "forged" | "mangled" | "ended";
const authArbitrary = fc.constantFrom<Auth>("session", "session", "session", "session", "none", "forged", "mangled", "ended");

function cookieHeader(auth: Auth): Record<string, string> {
  switch (auth) {
    case "session":
      return { cookie: world.cookie };
    case "none":
      return {};
    case "forged":
      return { cookie: "hangar_session=Zm9yZ2VkLmNvb2tpZQ.Zm9yZ2Vk" };
    case "mangled":
      return { cookie: "hangar_session=%E0%A4%A; other=1" };
    case "ended":
      return { cookie: world.endedCookie };
  }
}

/**
 * Next.js's own 308 of a path with a trailing or doubled slash (as the client normalised it: `a/..` is `a/`)
 * to its plain form, before any route sees the request.
 */
function isNextRedirect(url: string, status: number, location: string | undefined): boolean {
  const plain = (path: string) => new URL(path, "http://console").pathname.replace(/\/{2,}/g, "/").replace(/(.)\/$/, "$1");
  return status === 308 && location !== undefined && plain(location) === plain(url) && new URL(location, "http://console").pathname !== new URL(url, "http://console").pathname;
}

/** An answer: its status (0 for a connection cut while a big request was still being sent, see CUT), headers and body. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * A refusal of a request too big to read (Node's 431 for a request line past its header limit, Next.js's 400
 * for a path that does not decode, a tus refusal of a PATCH) closes the connection after the answer: the
 * client, still sending, may see the reset before the answer. For a request this big that is a refusal too (the
 * probes check the console is well); for a smaller one a reset is a failure.
 */
const CUT = { urlBytes: 16 * 1024, bodyBytes: 64 * 1024 };

async function send(method: string, url: string, headers: Record<string, string>, body?: string | Buffer): Promise<Answer> {
  try {
    const response = await world.api.fetch(url, { method, headers, data: body, timeout: REQUEST_MS, failOnStatusCode: false, maxRedirects: 0 });
    return { status: response.status(), headers: response.headers(), body: await response.body() };
  } catch (error) {
    const big = url.length >= CUT.urlBytes || (body?.length ?? 0) >= CUT.bodyBytes;
    if (big && /ECONNRESET|EPIPE|socket hang up/.test((error as Error).message)) return { status: 0, headers: {}, body: Buffer.from((error as Error).message.split("\n")[0]!) };
    throw error;
  }
}

// ---- a. tRPC ----

/** No input at all (no `input` parameter, no body). */
const ABSENT = new Raw("", "(no input)");

function validInputs(w: World): Record<ConsoleProcedure, readonly unknown[] | null> {
  const srRef = w.sr.ref;
  const [first, second] = w.volumes;
  const volume = { srRef: FAKE_REF, uuid: FAKE_UUID };
  return {
    "plugins.list": null,
    "plugins.diagnostics": [{ name: w.volumePlugin }, { name: w.volumePlugin, kind: "volume" }],
    "conformance.run": [{ plugin: "fuzz-no-such-plugin", datapath: null }, { plugin: "fuzz-x", datapath: "fuzz-y", configuration: { path: "/nonexistent" } }],
    "conformance.get": [{ id: FAKE_UUID }],
    "conformance.runs": [{}, { plugin: w.volumePlugin }],
    "conformance.cancel": [{ id: FAKE_UUID }],
    "hosts.list": null,
    "srs.list": [undefined, { volumeCounts: false }],
    "srs.get": [{ sr: srRef }, { sr: w.sr.uuid }],
    "srs.types": null,
    "srs.probe": [{ type: FAKE_TYPE, deviceConfig: {} }, { type: FAKE_TYPE, deviceConfig: { path: "/nonexistent" } }],
    "srs.create": [{ type: FAKE_TYPE, name: "fuzz", description: "", deviceConfig: {} }],
    "srs.setDefault": [{ sr: FAKE_REF }],
    "srs.attach": [{ sr: FAKE_REF }],
    "srs.detach": [{ sr: FAKE_REF }],
    "srs.forget": [{ sr: FAKE_REF, detachFirst: true }],
    "srs.destroy": [{ sr: FAKE_REF }],
    "volumes.list": [{ srRef }],
    "volumes.stat": [{ srRef, key: first?.key ?? "fuzz" }],
    "volumes.compare": [{ srRef, a: first?.key ?? "fuzz-a", b: second?.key ?? "fuzz-b" }],
    "volumes.copyTargets": [{ srRef }],
    "volumes.create": [{ srRef: FAKE_REF, name: "fuzz", description: "", size: MiB }],
    "volumes.resize": [{ ...volume, size: 2 * MiB }],
    "volumes.snapshot": [volume],
    "volumes.clone": [{ ...volume, name: "fuzz clone" }],
    "volumes.revert": [volume],
    "volumes.destroy": [volume],
    "volumes.rename": [{ ...volume, name: "fuzz", description: "d" }],
    "volumes.addKey": [{ ...volume, key: "k", value: "v" }],
    "volumes.removeKey": [{ ...volume, key: "k" }],
    "volumes.setCbt": [{ ...volume, enabled: true }],
    "volumes.copy": [{ ...volume, destSrRef: FAKE_REF2 }],
    "datasources.series": [{ srRef, rangeSeconds: 300 }],
    "vms.list": null,
    "vms.volumes": null,
    "vms.get": [{ ref: w.vm.ref }],
    "vms.rename": [{ ref: FAKE_REF, name: "fuzz" }],
    "vms.setDescription": [{ ref: FAKE_REF, description: "fuzz" }],
    "vms.destroy": [{ ref: FAKE_REF, keepDisks: true }],
    "tasks.list": null,
    "tasks.cancel": [{ ref: FAKE_REF }],
    "tasks.destroy": [{ ref: FAKE_REF }],
    "tasks.copySources": null,
    "tasks.startDataTask": [
      { target: "nbd", vdi: FAKE_REF, operation: "copy", remote: "nbd://127.0.0.1:1/fuzz" },
      { target: "sr", vdi: FAKE_REF, operation: "copy", sr: FAKE_REF2 },
      { target: "vdi", vdi: FAKE_REF, operation: "mirror", dest: FAKE_REF2 },
    ],
    "downloads.startExport": [{ vmRef: FAKE_REF, compression: "zstd" }, { vmRef: FAKE_REF, compression: "none", format: "ova" }],
    "downloads.startDiskExport": [{ vdiUuid: FAKE_UUID, format: "vmdk" }, { vdiUuid: FAKE_UUID, format: "qcow2", baseUuid: FAKE_UUID }],
    "downloads.exportProgress": [{ task: FAKE_REF }],
    "transfers.uploads": [undefined, {}, { ids: ["f022"] }],
    "transfers.importFromUrl": [{ url: "http://127.0.0.1:1/fuzz.xva", sr: FAKE_REF }, { url: "https://fuzz.invalid/vm.xva", sr: FAKE_REF }],
    "transfers.cancel": [{ id: "f022" }],
    "access.me": null,
    "users.list": null,
    // Refused by the toolstack however they are mangled: root is no local user to make, no directory is on, the
    // refs name nothing, the old password is not root's, the directory's URL reaches nothing.
    "users.createLocal": [{ name: "root", password: "fuzz-password", role: "read-only" }],
    "users.addDirectorySubject": [{ dn: "cn=fuzz,dc=invalid", role: "read-only" }],
    "users.setRole": [{ subject: FAKE_REF, role: "vm-admin" }, { subject: FAKE_REF, role: null }],
    "users.resetPassword": [{ subject: FAKE_REF, password: "fuzz-password" }],
    "users.setDisabled": [{ subject: FAKE_REF, disabled: true }],
    "users.remove": [{ subject: FAKE_REF }],
    "users.changeOwnPassword": [{ old: "not-the-old-password", new: "fuzz-password" }],
    "users.testDirectory": [DIRECTORY],
    "users.enableDirectory": [DIRECTORY],
    "users.disableDirectory": null,
    "audit.list": [{}, { user: "root", outcome: "DENIED", limit: 5 }, { since: "2026-01-01T00:00:00Z", action: "VM.destroy" }],
    "audit.verify": null,
  };
}

const DIRECTORY = { serviceName: "fuzz", url: "ldap://127.0.0.1:1", starttls: true, caCert: "", bindDn: "cn=fuzz", bindPassword: "fuzz", userBase: "dc=invalid", userFilter: "", userNameAttribute: "", groupBase: "", groupFilter: "" };

/** Hosts an import from URL may name: refused before any connection (loopback, unspecified, or no such name). */
function safeUrl(text: string): string {
  if (!/^\s*https?:\/\//i.test(text)) return text;
  try {
    const host = new URL(text.trim()).hostname;
    if (["127.0.0.1", "localhost", "[::1]", "0.0.0.0"].includes(host) || host.endsWith(".invalid")) return text;
  } catch {
    return text;
  }
  return "http://fuzz.invalid/redacted.xva";
}

/** A mutation's input with every real object's ref, uuid or name replaced: a mutation can change nothing real. */
function harmless(w: World, input: J): J {
  return mapStrings(input, (s) => {
    const lower = s.trim().toLowerCase();
    if (lower === "") return s;
    const hit = w.protectedStrings.some((p) => {
      const q = p.toLowerCase();
      return lower === q || (q.length >= 8 && lower.includes(q));
    });
    return hit ? REDACTED : safeUrl(s);
  });
}

interface Call {
  path: string;
  /** null: not a procedure of the router (an unknown path). */
  kind: "query" | "mutation" | null;
  input: J;
}

const UNKNOWN_PATHS = ["nope", "vms", "vms.", ".vms.list", "vms.list.x", "__proto__", "constructor", "toString", "vms.__proto__", "vms.constructor", "hasOwnProperty", "_def", "_def.procedures", "createCaller", "", "vms.list%00", "%2e%2e", "VMS.LIST"];

function callArbitrary(w: World): fc.Arbitrary<Call> {
  const valid = validInputs(w);
  const weird = weirdValue({ maxStringBytes: FUZZ_FULL ? 4_000_000 : 1_000_000, maxDepth: FUZZ_FULL ? 200_000 : 50_000 });
  const known = (Object.keys(CONSOLE_PROCEDURES) as ConsoleProcedure[]).map((path) => {
    const kind = CONSOLE_PROCEDURES[path];
    const seeds = (valid[path] ?? [undefined]).map((v) => (v === undefined ? ABSENT : toJ(v)));
    const input = fc.oneof(
      { arbitrary: fc.tuple(fc.constantFrom(...seeds), fc.array(editArbitrary(weird), { minLength: 1, maxLength: 3 })).map(([seed, edits]) => edits.reduce(applyEdit, seed)), weight: 6 },
      { arbitrary: fc.constantFrom(...seeds), weight: 2 },
      { arbitrary: weird, weight: 2 },
      { arbitrary: fc.constant(ABSENT), weight: 1 },
      { arbitrary: fc.string({ maxLength: 20 }).map((text) => new Raw(text)), weight: 1 },
    );
    return input.map((j): Call => ({ path, kind, input: kind === "mutation" ? harmless(w, j) : j }));
  });
  const unknown = fc.tuple(fc.oneof(fc.constantFrom(...UNKNOWN_PATHS), fc.string({ maxLength: 12 })), weird).map(([path, input]): Call => ({ path, kind: null, input }));
  return fc.oneof({ arbitrary: fc.oneof(...known), weight: 12 }, { arbitrary: unknown, weight: 1 });
}

interface TrpcCase {
  auth: Auth;
  /** single: one call, as a plain request; batch: ?batch=1; stream: the batch as the console's own client sends it (JSON lines). */
  transport: "single" | "batch" | "stream";
  /** The query's or mutation's own method (GET, POST), or the other one. */
  flip: boolean;
  calls: Call[];
}

function pathInUrl(path: string): string {
  return [...path].map((ch) => (/[A-Za-z0-9._,~-]/.test(ch) ? ch : encodeURIComponent(ch))).join("");
}

function trpcRequest(c: TrpcCase): { method: string; url: string; headers: Record<string, string>; body: string | undefined } {
  const calls = c.transport === "single" ? c.calls.slice(0, 1) : c.calls;
  const natural = calls[0]!.kind === "mutation" ? "POST" : "GET";
  const method = c.flip ? (natural === "GET" ? "POST" : "GET") : natural;
  const headers: Record<string, string> = { ...cookieHeader(c.auth), ...(c.transport === "stream" ? { "trpc-accept": "application/jsonl" } : {}) };
  let text: string | undefined;
  if (c.transport === "single") text = calls[0]!.input === ABSENT ? undefined : jsonText(calls[0]!.input);
  else text = `{${calls.flatMap((call, i) => (call.input === ABSENT ? [] : [`"${i}":${jsonText(call.input)}`])).join(",")}}`;
  const path = calls.map((call) => pathInUrl(call.path)).join(",");
  const params = [...(c.transport === "single" ? [] : ["batch=1"]), ...(method === "GET" && text !== undefined ? [`input=${encodeURIComponent(text)}`] : [])];
  const url = `/api/trpc/${path}${params.length > 0 ? `?${params.join("&")}` : ""}`;
  if (method === "POST") return { method, url, headers: { ...headers, "content-type": "application/json" }, body: text };
  return { method, url, headers, body: undefined };
}

interface ErrorShape {
  message?: string;
  code?: number;
  data?: { code?: string; httpStatus?: number; path?: string; xenapi?: string | null };
}

/** Every tRPC error and result in a JSON answer (one envelope, a batch's array, or a stream's lines). */
function envelopes(value: unknown, found: { errors: ErrorShape[]; results: number } = { errors: [], results: 0 }) {
  if (Array.isArray(value)) for (const item of value) envelopes(item, found);
  else if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (record.error !== undefined && typeof record.error === "object" && record.error !== null && "data" in record.error) found.errors.push(record.error as ErrorShape);
    // (A stream's result is `{"result":0}`, its data on later lines.)
    else if ("result" in record) found.results++;
    else for (const child of Object.values(record)) envelopes(child, found);
  }
  return found;
}

/** The 5xx a procedure may answer without a bug of the console's: an operation the storage does not have. */
const CLEAN_5XX = new Set([501]);

function checkTrpcAnswer(c: TrpcCase, url: string, status: number, location: string | undefined, text: string): void {
  const what = `HTTP ${status}: ${text.slice(0, 600)}`;
  if (status === 0 || isNextRedirect(url, status, location)) return;
  if (status >= 500 && !CLEAN_5XX.has(status)) throw new Error(`a 5xx answer: ${what}`);
  let found: { errors: ErrorShape[]; results: number };
  if (c.transport === "stream" && status === 200) {
    // JSON lines: the head, then one line per answer as it is ready.
    const lines = text.split("\n").filter((line) => line.trim() !== "");
    found = { errors: [], results: 0 };
    for (const line of lines) envelopes(JSON.parse(line), found);
    if (lines.length === 0) throw new Error(`an empty stream: ${what}`);
  } else {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      // Only a refusal before tRPC (a URL too long for the server) may be no JSON.
      if (status >= 200 && status < 300) throw new Error(`a success that is no JSON: ${what}`);
      if (status !== 431 && status !== 414 && status !== 413 && status !== 400) throw new Error(`an answer that is no tRPC envelope: ${what}`);
      return;
    }
    found = envelopes(json);
  }
  for (const error of found.errors) {
    const httpStatus = error.data?.httpStatus ?? 0;
    if (httpStatus >= 500 && !CLEAN_5XX.has(httpStatus)) throw new Error(`${error.data?.path ?? "?"} failed with ${error.data?.code} (${httpStatus}): ${error.message}`);
  }
  if (c.auth !== "session" && found.results > 0) throw new Error(`answered without a session (${c.auth}): ${what}`);
}

test("fuzz: every tRPC procedure, with generated and mangled inputs, answers a result or a clean error", async () => {
  test.setTimeout(testTimeout(TRPC));
  const w = world;
  // First every procedure with each of its valid inputs: with the session it exists (an unknown one is
  // NOT_FOUND; the list is the router's, see procedures.test.ts) and answers cleanly; without one (no cookie, a
  // forged or mangled one, a session logged out since) it is UNAUTHORIZED, whatever it would have done.
  const valid = validInputs(w);
  const wrong: string[] = [];
  const beforeSweep = await toolstackState();
  for (const [path, kind] of Object.entries(CONSOLE_PROCEDURES) as [ConsoleProcedure, "query" | "mutation"][]) {
    for (const input of valid[path] ?? [undefined]) {
      // (The slice leaves out the forged and mangled cookies: to the console they are no cookie, as none is.)
      for (const auth of FUZZ_FULL ? (["session", "none", "forged", "mangled", "ended"] as const) : (["session", "none", "ended"] as const)) {
        const c: TrpcCase = { auth, transport: "single", flip: false, calls: [{ path, kind, input: input === undefined ? ABSENT : toJ(input) }] };
        const { method, url, headers, body } = trpcRequest(c);
        const answer = await send(method, url, headers, body);
        const status = answer.status;
        const text = answer.body.toString("utf8");
        try {
          checkTrpcAnswer(c, url, status, answer.headers.location, text);
          if (auth === "session" && status === 404 && text.includes("No procedure found")) throw new Error("no such procedure");
          if (auth !== "session" && status !== 401) throw new Error(`HTTP ${status}, not 401`);
        } catch (error) {
          wrong.push(`${path} ${JSON.stringify(input) ?? "(no input)"} (${auth}): ${(error as Error).message.slice(0, 160)}`);
        }
      }
    }
  }
  expect(wrong, "procedures called with their valid inputs").toEqual([]);
  await expectToolstackAsBefore(beforeSweep, 10_000);
  const arbitrary = fc.record({
    auth: authArbitrary,
    transport: fc.constantFrom<TrpcCase["transport"]>("single", "single", "single", "batch", "stream"),
    flip: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
    calls: fc.array(callArbitrary(w), { minLength: 1, maxLength: 4 }),
  });
  await fuzzConsole({ target: "console tRPC", budget: TRPC, request: w.api, consolePid: w.consolePid }, arbitrary, async (c) => {
    const before = await toolstackState();
    const uploadsBefore = await listDir(spoolDir());
    const { method, url, headers, body } = trpcRequest(c);
    const answer = await send(method, url, headers, body);
    checkTrpcAnswer(c, url, answer.status, answer.headers.location, answer.body.toString("utf8"));
    await expectToolstackAsBefore(before, 5000);
    const uploads = await listDir(spoolDir());
    if (uploads.length !== uploadsBefore.length) throw new Error(`the upload spool changed: ${uploads.filter((n) => !uploadsBefore.includes(n)).join(", ")}`);
  });
});

// ---- b. tus ----

const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

interface TusTarget {
  kind: "created" | "created+suffix" | "victim" | "victim+suffix" | "path";
  text: string;
}

interface TusOp {
  method: "PATCH" | "HEAD" | "DELETE" | "OPTIONS" | "GET" | "POST";
  target: TusTarget;
  resumable: string | null;
  offset: "right" | "zero" | "ahead" | "behind" | "missing" | string;
  contentType: string;
  bytes: number;
  uploadLength: string | null;
}

interface TusCreate {
  resumable: string | null;
  length: string | null;
  deferLength: string | null;
  metadata: string | null;
  concat: string | null;
  body: { contentType: string; bytes: number } | null;
}

interface TusCase {
  auth: Auth;
  create: TusCreate | null;
  ops: TusOp[];
}

const resumableArbitrary = fc.oneof({ arbitrary: fc.constant("1.0.0"), weight: 12 }, { arbitrary: fc.constantFrom(null, "0.2.2", "1.0", "", "1.0.0, 1.0.0"), weight: 1 }, { arbitrary: headerText(12), weight: 1 });

function metadataArbitrary(w: World): fc.Arbitrary<string | null> {
  const fileName = fc.oneof(
    { arbitrary: fc.nat(9999).map((n) => `fuzz-${n}.xva`), weight: 6 },
    { arbitrary: fc.constantFrom("fuzz.xva.gz", "fuzz.tar", "fuzz.txt", "fuzz", "", " ", ".xva", "../../../etc/fuzz.xva", "a/b.xva", "x".repeat(5000) + ".xva", "😀.xva", "\u0000.xva", "fuzz.XVA"), weight: 3 },
    { arbitrary: fc.string({ maxLength: 16 }), weight: 1 },
  );
  const sr = fc.oneof(
    { arbitrary: fc.constantFrom(w.sr.ref, w.sr.uuid), weight: 6 },
    { arbitrary: fc.constantFrom(FAKE_REF, FAKE_UUID, "", "OpaqueRef:NULL", "OpaqueRef:", "not-a-uuid", "../x", w.sr.uuid.toUpperCase(), ` ${w.sr.ref}`), weight: 3 },
    { arbitrary: weirdString, weight: 1 },
  );
  const value = (text: fc.Arbitrary<string>) =>
    fc.oneof({ arbitrary: text.map((t) => ` ${b64(t)}`), weight: 8 }, { arbitrary: fc.constantFrom("", " ", " !!!", " a", " ===", " YQ", " YWJj=", " \t"), weight: 1 });
  const entry = fc.oneof(
    { arbitrary: value(fileName).map((v) => `filename${v}`), weight: 4 },
    { arbitrary: value(fileName).map((v) => `name${v}`), weight: 1 },
    { arbitrary: value(sr).map((v) => `sr${v}`), weight: 4 },
    { arbitrary: value(fc.constantFrom("application/octet-stream", "text/html", "")).map((v) => `filetype${v}`), weight: 1 },
    { arbitrary: value(fc.constantFrom("1700000000000", "-1", "x")).map((v) => `lastModified${v}`), weight: 1 },
    { arbitrary: fc.tuple(fc.constantFrom("__proto__", "constructor", "", "a b", "k,", "sr", "filename", "x".repeat(300)), value(fc.string({ maxLength: 8 }))).map(([k, v]) => `${k}${v}`), weight: 1 },
  );
  return fc.oneof(
    { arbitrary: fc.tuple(value(fileName), value(sr)).map(([f, s]) => `filename${f},sr${s}`), weight: 6 },
    { arbitrary: fc.array(entry, { maxLength: 5 }).map((entries) => entries.join(",")), weight: 3 },
    { arbitrary: fc.constant(null), weight: 1 },
    { arbitrary: headerText(60), weight: 1 },
    { arbitrary: fc.integer({ min: 1000, max: 12_000 }).map((n) => `filename ${b64("f.xva")},sr ${b64(w.sr.ref)},big ${"A".repeat(n)}`), weight: 1 },
  );
}

const lengthArbitrary = fc.oneof(
  { arbitrary: fc.integer({ min: 1, max: 8 * MiB }).map(String), weight: 8 },
  { arbitrary: fc.constantFrom("0", "-1", "1.5", "abc", "", " 5", "5 ", "1e3", "0x10", "00012", "9007199254740992", "9007199254740993", "99999999999999999999", "1000000000000000", "70000000000"), weight: 3 },
  { arbitrary: fc.constant(null), weight: 1 },
);

function tusCreateArbitrary(w: World): fc.Arbitrary<TusCreate> {
  return fc.record({
    resumable: resumableArbitrary,
    length: lengthArbitrary,
    deferLength: fc.oneof({ arbitrary: fc.constant(null), weight: 10 }, { arbitrary: fc.constantFrom("1", "0", "true", ""), weight: 1 }),
    metadata: metadataArbitrary(w),
    concat: fc.oneof(
      { arbitrary: fc.constant(null), weight: 10 },
      { arbitrary: fc.constantFrom("partial", "final;", "final;/api/upload/x /api/upload/y", "final;http://evil.invalid/a", "final;/api/upload/../../x", "final", "garbage"), weight: 1 },
    ),
    body: fc.oneof({ arbitrary: fc.constant(null), weight: 6 }, { arbitrary: fc.record({ contentType: fc.constantFrom("application/offset+octet-stream", "text/plain"), bytes: fc.nat(64 * 1024) }), weight: 1 }),
  });
}

const SUFFIXES = [".json", ".import-state", ".import-state.json", "/", "/..", "%2F..", "%00", ".", "..", "x", "%2e"];

function tusTargetArbitrary(): fc.Arbitrary<TusTarget> {
  return fc.oneof(
    { arbitrary: fc.constant<TusTarget>({ kind: "created", text: "" }), weight: 8 },
    { arbitrary: fc.constantFrom(...SUFFIXES).map((text): TusTarget => ({ kind: "created+suffix", text })), weight: 1 },
    { arbitrary: fc.constantFrom(...SUFFIXES).map((text): TusTarget => ({ kind: "victim+suffix", text })), weight: 2 },
    { arbitrary: fc.constant<TusTarget>({ kind: "victim", text: "" }), weight: 1 },
    {
      arbitrary: fc
        .oneof(
          fc.constantFrom("..", "%2e%2e", "..%2F..%2Fetc%2Fpasswd", "%2F", "a%00b", ".", "f022f022f022f022", "A".repeat(5000), "%E0%A4%A", "?", "#", "uploads", "..%2Fexports", "%2e%2e%2fexports"),
          fc.string({ unit: fc.constantFrom(..."abcdef0123456789_-.%/"), maxLength: 40 }),
        )
        .map((text): TusTarget => ({ kind: "path", text })),
      weight: 2,
    },
  );
}

const tusOpArbitrary = fc.record({
  method: fc.constantFrom<TusOp["method"]>("PATCH", "PATCH", "PATCH", "HEAD", "HEAD", "DELETE", "OPTIONS", "GET", "POST"),
  target: tusTargetArbitrary(),
  resumable: resumableArbitrary,
  offset: fc.oneof(
    { arbitrary: fc.constantFrom("right", "right", "right", "zero", "ahead", "behind", "missing"), weight: 6 },
    { arbitrary: fc.constantFrom("-1", "99999999999999999999", "9007199254740993", "1e3", "0x0", " 0", ""), weight: 1 },
    { arbitrary: headerText(10), weight: 1 },
  ),
  contentType: fc.oneof({ arbitrary: fc.constant("application/offset+octet-stream"), weight: 8 }, { arbitrary: fc.constantFrom("application/octet-stream", "text/plain", "application/offset+octet-stream; charset=utf-8", ""), weight: 1 }),
  bytes: fc.oneof({ arbitrary: fc.nat(64 * 1024), weight: 6 }, { arbitrary: fc.integer({ min: 64 * 1024, max: 3 * MiB }), weight: 1 }),
  uploadLength: fc.oneof({ arbitrary: fc.constant(null), weight: 10 }, { arbitrary: fc.constantFrom("5", "-1", "x"), weight: 1 }),
});

/** What the fuzz knows of an upload it made: its id, length, and the offset the console has acknowledged. */
interface Made {
  id: string;
  length: number;
  offset: number;
}

const UPLOAD_STATUSES_ENDED = new Set(["cancelled", "failed", "done"]);
/** Statuses a tus answer may have: its protocol's refusals, the console's (401, 403, 422 failed, 507 no room), 501 for an extension it lacks. */
const TUS_STATUSES = new Set([200, 201, 204, 400, 401, 403, 404, 405, 409, 410, 412, 413, 415, 422, 460, 501, 507]);

async function readUploadState(id: string): Promise<{ status: string } | undefined> {
  try {
    return JSON.parse(await readFile(join(spoolDir(), `${id}.import-state`), "utf8")) as { status: string };
  } catch {
    return undefined;
  }
}

async function tusRequest(method: string, path: string, headers: Record<string, string>, body?: Buffer): Promise<{ status: number; headers: Record<string, string>; text: string }> {
  const answer = await send(method, `/api/upload${path}`, headers, body);
  return { status: answer.status, headers: answer.headers, text: answer.body.toString("utf8").slice(0, 400) };
}

/** An upload of another tab, waiting for its bytes while the fuzz runs: no case may touch it. */
interface Victim {
  id: string;
  /** Its import's toolstack task, pending while it waits. */
  task: string;
}

async function makeVictim(w: World): Promise<Victim> {
  const answer = await tusRequest("POST", "", { ...cookieHeader("session"), "tus-resumable": "1.0.0", "upload-length": String(4 * MiB), "upload-metadata": `filename ${b64(`fuzz-victim-${Date.now()}.xva`)},sr ${b64(w.sr.ref)}` });
  expect(answer.status, answer.text).toBe(201);
  const id = answer.headers.location!.split("/").pop()!;
  // The start of an XVA (a tar whose first member is ova.xml): the console knows what it imports from its first
  // 4 KiB, and its import then waits for the rest.
  const head = Buffer.concat([tarHeader({ name: "ova.xml", size: 1024 * 1024, mtime: 0 }), Buffer.alloc(PACKAGE_SNIFF_BYTES - 512)]);
  const sent = await tusRequest("PATCH", `/${id}`, { ...cookieHeader("session"), "tus-resumable": "1.0.0", "upload-offset": "0", "content-type": "application/offset+octet-stream" }, head);
  expect(sent.status, sent.text).toBe(204);
  let task: string | null | undefined;
  await eventually(10_000, async () => {
    task = (await readFile(join(spoolDir(), `${id}.import-state`), "utf8").then((t) => JSON.parse(t) as { task: string | null }, () => undefined))?.task;
    return task === null || task === undefined ? "the victim upload's import has no task yet" : undefined;
  });
  return { id, task: task! };
}

/** Why the victim is no longer whole (a file gone, its import ended), or undefined. */
async function victimDamage(victim: Victim): Promise<string | undefined> {
  const names = await listDir(spoolDir());
  const gone = [victim.id, `${victim.id}.json`, `${victim.id}.import-state`].filter((n) => !names.includes(n));
  if (gone.length > 0) return `the victim upload lost ${gone.join(", ")}`;
  const state = await readUploadState(victim.id);
  if (state?.status !== "uploading" && state?.status !== "importing") return `the victim upload is ${state?.status}`;
  return undefined;
}

async function removeUpload(id: string): Promise<void> {
  await tusRequest("DELETE", `/${id}`, { ...cookieHeader("session"), "tus-resumable": "1.0.0" });
  await eventually(10_000, async () => {
    const state = await readUploadState(id);
    return state === undefined || UPLOAD_STATUSES_ENDED.has(state.status) ? undefined : `upload ${id} is ${state.status} after its DELETE`;
  });
  await rm(join(spoolDir(), `${id}.import-state`), { force: true });
}

test("fuzz: the tus upload endpoint answers generated requests with tus statuses, and leaves no upload half-made", async () => {
  test.setTimeout(testTimeout(TUS));
  const w = world;
  let victim = await makeVictim(w);

  const arbitrary = fc.record({
    auth: authArbitrary,
    create: fc.oneof({ arbitrary: tusCreateArbitrary(w), weight: 4 }, { arbitrary: fc.constant(null), weight: 1 }),
    ops: fc.array(tusOpArbitrary, { maxLength: 4 }),
  });
  try {
    await fuzzConsole({ target: "console tus", budget: TUS, request: w.api, consolePid: w.consolePid }, arbitrary, async (c: TusCase) => {
      // Each case on its own: a victim a failed case damaged is made again, and what was there stays out of its checks.
      if ((await victimDamage(victim)) !== undefined) {
        await removeUpload(victim.id).catch(() => undefined);
        victim = await makeVictim(w);
      }
      const namesBefore = new Set(await listDir(spoolDir()));
      const before = await toolstackState();
      const auth = cookieHeader(c.auth);
      // The victim's own user may change it (its bytes, its cancel): it is then made again after the case.
      const ownerChanged = c.auth === "session" && c.ops.some((op) => op.target.kind === "victim" && (op.method === "PATCH" || op.method === "DELETE"));
      const made: Made[] = [];
      const check = (what: string, status: number, text: string, path?: string, location?: string) => {
        if (path !== undefined && isNextRedirect(`/api/upload/${path}`, status, location)) return;
        if (status === 0) return;
        if (!TUS_STATUSES.has(status)) throw new Error(`${what}: HTTP ${status}: ${text}`);
        // OPTIONS (tus's discovery, a browser's CORS preflight: never with cookies) answers anyone, with no upload's data.
        if (c.auth !== "session" && status >= 200 && status < 300 && !what.startsWith("OPTIONS")) throw new Error(`${what} succeeded without a session (${c.auth}): HTTP ${status}`);
      };
      try {
        if (c.create !== null) {
          const k = c.create;
          const headers: Record<string, string> = { ...auth };
          if (k.resumable !== null) headers["tus-resumable"] = k.resumable;
          if (k.length !== null) headers["upload-length"] = k.length;
          if (k.deferLength !== null) headers["upload-defer-length"] = k.deferLength;
          if (k.metadata !== null) headers["upload-metadata"] = k.metadata;
          if (k.concat !== null) headers["upload-concat"] = k.concat;
          if (k.body !== null) headers["content-type"] = k.body.contentType;
          const answer = await tusRequest("POST", "", headers, k.body === null ? undefined : Buffer.alloc(k.body.bytes, 0x5a));
          if (answer.status === 201) {
            const id = answer.headers.location?.split("/").pop();
            if (id === undefined || !/^[A-Za-z0-9_-]+$/.test(id)) throw new Error(`POST: 201 with Location ${answer.headers.location}`);
            made.push({ id, length: Number(k.length), offset: Number(answer.headers["upload-offset"] ?? 0) });
          }
          check("POST", answer.status, answer.text);
          if (answer.status === 501 && k.concat === null && k.deferLength === null) throw new Error(`POST: 501 without Upload-Concat or Upload-Defer-Length: ${answer.text}`);
        }
        for (const op of c.ops) {
          const upload = made[0];
          const id =
            op.target.kind === "created" ? (upload?.id ?? "f022f022f022f022f022f022f022f022")
            : op.target.kind === "created+suffix" ? `${upload?.id ?? "f022"}${op.target.text}`
            : op.target.kind === "victim" ? victim.id
            : op.target.kind === "victim+suffix" ? `${victim.id}${op.target.text}`
            : op.target.text;
          const headers: Record<string, string> = { ...auth };
          if (op.resumable !== null) headers["tus-resumable"] = op.resumable;
          let body: Buffer | undefined;
          if (op.method === "PATCH") {
            const offset = upload?.offset ?? 0;
            const value = { right: offset, zero: 0, ahead: offset + 1, behind: Math.max(0, offset - 1) }[op.offset as "right"];
            if (op.offset !== "missing") headers["upload-offset"] = value === undefined ? op.offset : String(value);
            headers["content-type"] = op.contentType;
            if (op.uploadLength !== null) headers["upload-length"] = op.uploadLength;
            body = Buffer.alloc(op.bytes, 0x41);
          }
          const answer = await tusRequest(op.method, id === "" ? "" : `/${id}`, headers, body);
          check(`${op.method} ${id.slice(0, 60)}`, answer.status, answer.text, id, answer.headers.location);
          if (answer.status === 0 && upload !== undefined) {
            // Cut mid-body: how much arrived is what HEAD says, as a tus client resumes.
            const head = await tusRequest("HEAD", `/${upload.id}`, { ...cookieHeader("session"), "tus-resumable": "1.0.0" });
            if (head.status === 200) upload.offset = Number(head.headers["upload-offset"]);
          }
          if (op.method === "PATCH" && answer.status === 204 && upload !== undefined && op.target.kind === "created") {
            const offset = Number(answer.headers["upload-offset"]);
            if (offset !== Number(headers["upload-offset"]) + op.bytes) throw new Error(`PATCH: 204 with Upload-Offset ${answer.headers["upload-offset"]} after ${op.bytes} bytes at ${headers["upload-offset"]}`);
            upload.offset = offset;
          }
          if (op.method === "HEAD" && answer.status === 200 && upload !== undefined && op.target.kind === "created") {
            if (Number(answer.headers["upload-offset"]) !== upload.offset || Number(answer.headers["upload-length"]) !== upload.length) {
              throw new Error(`HEAD: offset ${answer.headers["upload-offset"]} / length ${answer.headers["upload-length"]}, the fuzz has ${upload.offset} / ${upload.length}`);
            }
          }
        }
      } finally {
        // The case's own uploads are terminated, as a browser's cancel does.
        for (const upload of made) await tusRequest("DELETE", `/${upload.id}`, { ...cookieHeader("session"), "tus-resumable": "1.0.0" });
      }
      try {
        // Nothing half-made: each upload's spool and tus record gone, its import ended; the victim intact.
        await eventually(8000, async () => {
          const names = await listDir(spoolDir());
          for (const upload of made) {
            if (names.includes(upload.id) || names.includes(`${upload.id}.json`)) return `upload ${upload.id}: its spool is still there after its DELETE`;
            const state = await readUploadState(upload.id);
            if (state !== undefined && !UPLOAD_STATUSES_ENDED.has(state.status)) return `upload ${upload.id}: ${state.status} after its DELETE`;
          }
          const stray = names.filter((n) => !namesBefore.has(n) && !made.some((u) => n === `${u.id}.import-state`));
          if (stray.length > 0) {
            const states = await Promise.all(stray.filter((n) => n.endsWith(".import-state")).map((n) => readFile(join(spoolDir(), n), "utf8").catch(() => "")));
            return `files left in the upload spool: ${stray.join(", ")} ${states.map((t) => t.replace(/"session":"[^"]*"/, '"session":"…"')).join(" ")}`;
          }
          return ownerChanged ? undefined : victimDamage(victim);
        });
        if (ownerChanged) {
          // Settled now, not in the next case: its import may fail later (the bytes are no archive).
          await removeUpload(victim.id);
          victim = await makeVictim(w);
        }
        await expectToolstackAsBefore(before, 10_000, new Set([victim.task]));
      } finally {
        // The ended uploads' records are kept a day by design (the transfers list shows them): the fuzz removes its own.
        for (const upload of made) await rm(join(spoolDir(), `${upload.id}.import-state`), { force: true });
      }
    });
  } finally {
    await removeUpload(victim.id);
  }
});

// ---- c. downloads ----

interface Base {
  bytes: Buffer;
  etag: string;
  lastModified: string;
}

interface DownloadCase {
  auth: Auth;
  file: { kind: "vm" | "unknown" | "garbage"; text: string };
  compression: string | null;
  task: string | null;
  method: "GET" | "HEAD" | "POST" | "DELETE";
  range: string | null;
  ifRange: "base-etag" | "base-date" | "other-etag" | "garbage" | null;
  concurrent: boolean;
}

function rangeArbitrary(size: number): fc.Arbitrary<string> {
  const position = fc.oneof(
    { arbitrary: fc.constantFrom(0, 1, size - 1, size, size + 1), weight: 3 },
    { arbitrary: fc.nat(size * 2), weight: 3 },
    { arbitrary: fc.constantFrom("99999999999999999999", String(2 ** 53), "9007199254740991"), weight: 1 },
  );
  const single = fc.tuple(position, fc.option(position, { nil: undefined })).map(([a, b]) => `bytes=${a}-${b ?? ""}`);
  return fc.oneof(
    { arbitrary: single, weight: 6 },
    { arbitrary: fc.oneof(fc.nat(size * 2), fc.constant(0)).map((n) => `bytes=-${n}`), weight: 1 },
    { arbitrary: fc.array(single, { minLength: 2, maxLength: 4 }).map((specs) => `bytes=${specs.map((s) => s.slice(6)).join(",")}`), weight: 1 },
    {
      arbitrary: fc.constantFrom("bytes=", "bytes=-", "bytes=--1", "bytes=1-0", `bytes=${size}-0`, "bytes = 0-1", "BYTES=0-1", "items=0-1", "bytes=0-1 ", " bytes=0-1", "bytes=+1-2", "bytes=0x10-", "bytes=1e3-", "bytes=0-1,", "bytes=,0-1", "bytes=-0", "bytes=0-18446744073709551616"),
      weight: 2,
    },
    { arbitrary: headerText(30), weight: 1 },
  );
}

/** `bytes=a-b` or `bytes=a-` with a ≤ b, numbers a JavaScript number holds: the one form the route must honour. */
function singleRange(header: string | null): { start: number; end: number | undefined } | undefined {
  const match = header === null ? null : /^bytes=(\d+)-(\d*)$/.exec(header.trim());
  if (match === null) return undefined;
  const start = Number(match[1]);
  const end = match[2] === "" ? undefined : Number(match[2]);
  if (!Number.isSafeInteger(start) || (end !== undefined && (!Number.isSafeInteger(end) || end < start))) return undefined;
  return { start, end };
}

function checkDownload(c: DownloadCase, base: Base, request: Record<string, string>, status: number, headers: Record<string, string>, body: Buffer): void {
  const what = `HTTP ${status} (${JSON.stringify(headers)}): ${body.subarray(0, 200).toString("utf8")}`;
  if (status >= 500) throw new Error(`a 5xx answer: ${what}`);
  if (c.auth !== "session") {
    // Refused (401; a method or a query the route does not take may be said first): never an export's bytes.
    const refusedFirst = c.method === "POST" || c.method === "DELETE" || c.auth === "ended";
    if (refusedFirst ? status < 400 || status >= 500 : status !== 401) throw new Error(`without a session (${c.auth}): ${what}`);
    return;
  }
  if (c.method === "POST" || c.method === "DELETE") {
    if (status !== 405) throw new Error(`${c.method}: ${what}`);
    return;
  }
  if (c.file.kind !== "vm") {
    if (status !== 404 && status !== 400) throw new Error(`an export of no VM: ${what}`);
    return;
  }
  if (status === 400) {
    // Only a query the route cannot take: a compression it does not know, a task that is no ref.
    const badCompression = c.compression !== null && !["none", "gzip", "zstd"].includes(c.compression);
    const badTask = c.task !== null && !/^OpaqueRef:[\w-]+$/.test(c.task);
    if (!badCompression && !badTask) throw new Error(`400 for a good query: ${what}`);
    return;
  }
  if (c.method === "HEAD") {
    if (status !== 200) throw new Error(`HEAD: ${what}`);
    return;
  }
  const range = singleRange(request.range ?? null);
  const sameBase = headers.etag === base.etag;
  if (status === 206) {
    if (range === undefined) throw new Error(`206 for a Range the route should ignore: ${what}`);
    const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(headers["content-range"] ?? "");
    if (m === null) throw new Error(`206 without a good Content-Range: ${what}`);
    const [start, end, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (start !== range.start || end !== Math.min(range.end ?? total - 1, total - 1) || end >= total) throw new Error(`206 with Content-Range ${headers["content-range"]} for ${request.range}`);
    if (body.length !== end - start + 1 || Number(headers["content-length"]) !== body.length) throw new Error(`206 with ${body.length} bytes (Content-Length ${headers["content-length"]}) for ${headers["content-range"]}`);
    if (sameBase && (total !== base.bytes.length || !body.equals(base.bytes.subarray(start, end + 1)))) throw new Error(`206: the bytes of ${headers["content-range"]} are not the export's`);
    return;
  }
  if (status === 416) {
    const m = /^bytes \*\/(\d+)$/.exec(headers["content-range"] ?? "");
    if (range === undefined || m === null || range.start < Number(m[1])) throw new Error(`416 for ${request.range}: ${what}`);
    return;
  }
  if (status === 200) {
    if (headers["content-length"] !== undefined && Number(headers["content-length"]) !== body.length) throw new Error(`200 with ${body.length} bytes, Content-Length ${headers["content-length"]}`);
    if (sameBase && !body.equals(base.bytes)) throw new Error("200 with the base export's ETag, but other bytes");
    // A valid single range naming the complete export by its ETag must be served from it.
    if (range !== undefined && request["if-range"] === base.etag && (c.compression ?? "none") === "none" && c.task === null) throw new Error(`200 for ${request.range} with If-Range of a complete export: ${what}`);
    return;
  }
  throw new Error(`an unexpected status: ${what}`);
}

test("fuzz: the download route answers generated Range requests as RFC 9110 says, with the export's bytes", async () => {
  test.setTimeout(testTimeout(DOWNLOADS));
  const w = world;
  const url = (file: string, query: string) => `/api/download/vm/${file}${query}`;
  const spoolsAtStart = new Set(await listDir(exportsDir()));
  // The complete export the Range requests are served from (the latest of the VM, compression none).
  const first = await send("GET", url(`${w.vm.uuid}.xva`, "?compression=none"), cookieHeader("session"));
  expect(first.status).toBe(200);
  const base: Base = { bytes: first.body, etag: first.headers.etag!, lastModified: first.headers["last-modified"]! };
  await eventually(10_000, async () => (pending(await toolstackState()).length === 0 ? undefined : "the base export is still running"));
  const size = base.bytes.length;

  const arbitrary = fc.record({
    auth: fc.constantFrom<Auth>("session", "session", "session", "session", "session", "none", "forged", "ended"),
    file: fc.oneof(
      { arbitrary: fc.constantFrom<DownloadCase["file"]>({ kind: "vm", text: `${w.vm.uuid}.xva` }, { kind: "vm", text: `${w.vm.uuid.toUpperCase()}.XVA` }), weight: 10 },
      { arbitrary: fc.constantFrom(`${FAKE_UUID}.xva`, "00000000-0000-0000-0000-000000000000.xva").map((text): DownloadCase["file"] => ({ kind: "unknown", text })), weight: 1 },
      {
        arbitrary: fc
          .oneof(fc.constantFrom(w.vm.uuid, `${w.vm.uuid}.tar`, "..%2F..%2Fetc%2Fpasswd", "%2e%2e.xva", `${w.vm.uuid}%00.xva`, `${w.vm.uuid}.xva.xva`, ".xva", "%E0%A4%A.xva"), fc.string({ unit: fc.constantFrom(..."abcdef0123456789-.x%"), minLength: 1, maxLength: 40 }))
          // Not empty: `/api/download/vm/` is Next's trailing-slash redirect (308) to the route's folder, no file.
          .map((text): DownloadCase["file"] => ({ kind: "garbage", text })),
        weight: 1,
      },
    ),
    compression: fc.oneof({ arbitrary: fc.constantFrom("none", "none", "none", null), weight: 8 }, { arbitrary: fc.constantFrom("zstd", "gzip"), weight: 1 }, { arbitrary: fc.constantFrom("", "NONE", "lz4", "none&compression=zstd", "%00"), weight: 1 }),
    task: fc.oneof({ arbitrary: fc.constant(null), weight: 10 }, { arbitrary: fc.constantFrom(FAKE_REF, "OpaqueRef:NULL", "garbage", ""), weight: 1 }),
    method: fc.oneof({ arbitrary: fc.constant<DownloadCase["method"]>("GET"), weight: 12 }, { arbitrary: fc.constantFrom<DownloadCase["method"]>("HEAD", "POST", "DELETE"), weight: 1 }),
    range: fc.oneof({ arbitrary: rangeArbitrary(size), weight: 8 }, { arbitrary: fc.constant(null), weight: 1 }),
    ifRange: fc.oneof({ arbitrary: fc.constant<DownloadCase["ifRange"]>("base-etag"), weight: 4 }, { arbitrary: fc.constantFrom<DownloadCase["ifRange"]>(null, "base-date", "other-etag", "garbage"), weight: 3 }),
    concurrent: fc.oneof({ arbitrary: fc.constant(false), weight: 6 }, { arbitrary: fc.constant(true), weight: 1 }),
  });
  try {
    await fuzzDownloads(w, base, arbitrary);
  } finally {
    // The base export's spools too.
    for (const name of await listDir(exportsDir())) if (!spoolsAtStart.has(name)) await rm(join(exportsDir(), name), { force: true });
  }
});

async function fuzzDownloads(w: World, base: Base, arbitrary: fc.Arbitrary<DownloadCase>): Promise<void> {
  const url = (file: string, query: string) => `/api/download/vm/${file}${query}`;
  await fuzzConsole({ target: "console downloads", budget: DOWNLOADS, request: w.api, consolePid: w.consolePid }, arbitrary, async (c: DownloadCase) => {
    const before = await toolstackState();
    const spoolsBefore = new Set(await listDir(exportsDir()));
    const params = [...(c.compression === null ? [] : [`compression=${c.compression}`]), ...(c.task === null ? [] : [`task=${encodeURIComponent(c.task)}`])];
    const target = url(c.file.text, params.length === 0 ? "" : `?${params.join("&")}`);
    const headers: Record<string, string> = { ...cookieHeader(c.auth) };
    if (c.range !== null) headers.range = c.range;
    if (c.ifRange !== null) headers["if-range"] = { "base-etag": base.etag, "base-date": base.lastModified, "other-etag": '"hx1-1000-0123456789abcdef0123"', garbage: "W/garbage" }[c.ifRange];
    try {
      const [answer, alongside] = await Promise.all([
        send(c.method, target, headers),
        c.concurrent ? send("GET", target, cookieHeader(c.auth)) : Promise.resolve(undefined),
      ]);
      checkDownload(c, base, headers, answer.status, answer.headers, answer.body);
      if (alongside !== undefined) checkDownload({ ...c, method: "GET", range: null, ifRange: null }, base, {}, alongside.status, alongside.headers, alongside.body);
      await expectToolstackAsBefore(before, 10_000);
      // Every export of the case complete in its spool (none left half-written).
      await eventually(10_000, async () => {
        const names = await listDir(exportsDir());
        const tmp = names.filter((n) => n.endsWith(".tmp"));
        if (tmp.length > 0) return `half-written spool facts: ${tmp.join(", ")}`;
        for (const name of names.filter((n) => n.endsWith(".json") && !spoolsBefore.has(n))) {
          const meta = JSON.parse(await readFile(join(exportsDir(), name), "utf8").catch(() => "{}")) as { size?: number | null };
          if (meta.size === null) return `the export spool ${name} is not complete`;
          if (!names.includes(name.replace(/\.json$/, ".xva"))) return `the export spool ${name} has no archive`;
        }
        return undefined;
      });
    } finally {
      // Complete spools are kept for the retention by design (a day): the fuzz removes those its case made.
      for (const name of await listDir(exportsDir())) if (!spoolsBefore.has(name)) await rm(join(exportsDir(), name), { force: true });
    }
  });
}
