// The console's API in tests, against a real toolstack: a fresh `hangar serve` over a fresh host, a real login
// through the console's own session code, and callers with and without the session cookie.
import type { TestContext } from "node:test";
import { type ConsoleSession, SESSION_COOKIE, logIn } from "../auth/session.ts";
import { defaultPluginRoot } from "../storage/registry.ts";
import { ROOT_PASSWORD } from "../toolstack/testing.ts";
import { type TestToolstack, startTestToolstack } from "../toolstack/storage-testing.ts";
import { XenApiClient } from "../xenapi/client.ts";
import { createCaller } from "./root.ts";
import { createTRPCContext } from "./trpc.ts";

export interface ConsoleUnderTest {
  toolstack: TestToolstack;
  session: ConsoleSession;
  /** The API as the logged-in root user calls it. */
  caller: ReturnType<typeof createCaller>;
  /** The API as a visitor without a cookie calls it. */
  anonymous: ReturnType<typeof createCaller>;
  /** A XenAPI client on the same session, to set up or check what the console did. */
  xapi: XenApiClient;
  /** Headers carrying the session cookie, for route handlers. */
  headers: Headers;
}

/** Starts a toolstack for this test (stopped after it) and logs the console in as root. */
export async function startConsoleUnderTest(t: TestContext, options: { pluginRoot?: string } = {}): Promise<ConsoleUnderTest> {
  const toolstack = await startTestToolstack(options.pluginRoot === undefined ? {} : { pluginRoot: options.pluginRoot });
  t.after(() => toolstack.stop());
  return { toolstack, ...(await consoleOn(`http://127.0.0.1:${toolstack.service.httpPort}`, options)) };
}

/** The console pointed at the toolstack at `url` (HANGAR_TOOLSTACK_URL), logged in as root. */
export async function consoleOn(url: string, options: { pluginRoot?: string } = {}): Promise<Omit<ConsoleUnderTest, "toolstack">> {
  process.env.HANGAR_TOOLSTACK_URL = url;
  process.env.HANGAR_CONSOLE_SECRET ??= "hangar-console-test-secret";
  const { cookie, session } = await logIn("root", ROOT_PASSWORD);
  const headers = new Headers({ cookie: `${SESSION_COOKIE}=${cookie}` });
  const pluginRoot = options.pluginRoot ?? defaultPluginRoot();
  return {
    session,
    caller: createCaller({ ...createTRPCContext({ headers }), pluginRoot }),
    anonymous: createCaller({ ...createTRPCContext({ headers: new Headers() }), pluginRoot }),
    xapi: new XenApiClient(url, session.session),
    headers,
  };
}
