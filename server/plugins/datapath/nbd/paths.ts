// Where the nbd datapath keeps things, derived from the volume URI so that every short-lived plugin call and
// the volume's daemon agree without asking each other.
import { join } from "node:path";
import { runDir } from "../../../config.ts";
import { storageErrors } from "../../../storage/errors.ts";
import { datapathDir, recordId } from "../../runtime/datapath-state.ts";

/** sun_path holds 108 bytes with the NUL; stay clear of the limit. */
const MAX_SOCKET_PATH = 100;

export function daemonName(uri: string): string {
  return `nbd-${recordId(uri)}`;
}

function socketPath(uri: string, suffix: string): string {
  const path = join(runDir(), "nbd", `${recordId(uri)}${suffix}`);
  if (Buffer.byteLength(path) >= MAX_SOCKET_PATH) {
    throw storageErrors.backendFailure(`socket path ${path} is too long for a unix socket: set HANGAR_RUN_DIR to a shorter directory`);
  }
  return path;
}

/** The unix socket the volume's NBD export listens on. */
export function exportSocket(uri: string): string {
  return socketPath(uri, ".sock");
}

/** The unix socket that takes connected fds for Datapath.import_activate. */
export function importSocket(uri: string): string {
  return socketPath(uri, ".import.sock");
}

export function operationsDir(): string {
  return join(datapathDir("nbd"), "operations");
}
