// The plugin side of a volume daemon: start it, find it, send it typed commands, stop it.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { FileSrError, type FileSrErrorKind } from "../../filesr/index.ts";
import { isPidRunning } from "../../filesr/liveness.ts";
import { bundleIsFresh } from "../../runtime/bundle-freshness.ts";
import { control, type Daemon, ensureDaemon, findDaemon, stopDaemon } from "../../runtime/daemon.ts";
import { type Command, type CommandBody, type CommandResult, commands, FILESR_ERROR, STOPPING } from "./control-protocol.ts";
import { daemonName } from "./paths.ts";

const DAEMON_SOURCE = fileURLToPath(new URL("./daemon.ts", import.meta.url));

/** The plugin's bundled daemon while its bundle is fresh (it starts ~ms sooner: one pre-linked file), else the sources. */
function daemonScript(): string {
  const bundled = join(dirname(DAEMON_SOURCE), ".bundle", "current");
  return bundleIsFresh(pathToFileURL(join(bundled, "manifest.json"))) && existsSync(join(bundled, "daemon.mjs")) ? join(bundled, "daemon.mjs") : DAEMON_SOURCE;
}
const START_ATTEMPTS = 20;
const EXIT_WAIT_MS = 10_000;

export async function send<C extends Command>(daemon: Daemon, command: C, body: CommandBody<C>): Promise<CommandResult<C>> {
  let answer: unknown;
  try {
    answer = await control(daemon, command, body);
  } catch (error) {
    throw revive(error);
  }
  return commands[command].result.parse(answer) as CommandResult<C>;
}

/** Sends a command to the volume's daemon, starting one when none runs or the one found is stopping. */
export async function sendStarting<C extends Command>(uri: string, command: C, body: CommandBody<C>): Promise<CommandResult<C>> {
  for (let attempt = 1; ; attempt++) {
    const daemon = await ensureDaemon(daemonName(uri), daemonScript(), [uri]);
    try {
      return await send(daemon, command, body);
    } catch (error) {
      if (!isStopping(error) || attempt >= START_ATTEMPTS) throw error;
      for (let waited = 0; isPidRunning(daemon.pid) && waited < EXIT_WAIT_MS; waited += 20) await sleep(20);
    }
  }
}

/** Sends a command to the volume's daemon if one runs; undefined when none does (or it is stopping). */
export async function sendIfRunning<C extends Command>(uri: string, command: C, body: CommandBody<C>): Promise<CommandResult<C> | undefined> {
  const daemon = await findDaemon(daemonName(uri));
  if (daemon === undefined) return undefined;
  try {
    return await send(daemon, command, body);
  } catch (error) {
    if (isStopping(error)) return undefined;
    throw error;
  }
}

export function findVolumeDaemon(uri: string): Promise<Daemon | undefined> {
  return findDaemon(daemonName(uri));
}

export function stopVolumeDaemon(uri: string): Promise<void> {
  return stopDaemon(daemonName(uri));
}

function isStopping(error: unknown): boolean {
  return error instanceof Error && error.message.includes(STOPPING);
}

/** The daemon sends file SR failures as JSON so that they reach the toolstack as the same interface errors. */
function revive(error: unknown): unknown {
  if (!(error instanceof Error) || !error.message.startsWith(FILESR_ERROR)) return error;
  const { kind, code, message, params } = JSON.parse(error.message.slice(FILESR_ERROR.length)) as {
    kind: FileSrErrorKind;
    code: string;
    message: string;
    params: string[];
  };
  return new FileSrError(kind, code, message, params);
}
