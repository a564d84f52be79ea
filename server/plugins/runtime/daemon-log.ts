// A plugin daemon's log: its stdout and stderr (its own lines and Node's), one file per daemon name in the run
// dir's daemons directory. A log past LOG_LIMIT is set aside as .1 (replacing the one before) when the next
// daemon of that name starts: a volume's daemon writes a few lines per attach and lives as long as one, so
// that bounds them. Apart from daemon.ts so that a volume plugin call can remove logs without loading it.
import { openSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { runDir } from "../../config.ts";

const LOG_LIMIT = 1024 * 1024;

/** Pid files, control sockets, locks and logs of the daemons. */
export function daemonsDir(): string {
  return join(runDir(), "daemons");
}

export function daemonLog(name: string): string {
  return join(daemonsDir(), `${name}.log`);
}

/** The log of a daemon about to start, opened for appending (an fd); one past the limit is set aside first. */
export function openDaemonLog(name: string): number {
  const log = daemonLog(name);
  if ((statSync(log, { throwIfNoEntry: false })?.size ?? 0) >= LOG_LIMIT) renameSync(log, `${log}.1`);
  return openSync(log, "a");
}

/** Removes a daemon's logs, e.g. with the volume it served. */
export function removeDaemonLogs(name: string): void {
  const log = daemonLog(name);
  rmSync(log, { force: true });
  rmSync(`${log}.1`, { force: true });
}
