// Activation bookkeeping for datapath plugins: which host/domain has a volume activated, and how.
// A read-write activation is exclusive across hosts; read-only ones may be many, but never alongside a
// read-write one (the interface's VDI_ACTIVATE_READONLY rules). Same host + domain again is a no-op.
import { connectSr, statement, transact } from "./db.ts";
import { cancelMergesOf } from "./layers.ts";
import { requireVolume, validateKey, validateText } from "./volume-records.ts";
import { activatedElsewhere, invalid } from "./errors.ts";

export type ActivationMode = "rw" | "ro";

export interface Activation {
  host: string;
  domain: string;
  mode: ActivationMode;
}

export async function recordActivation(srPath: string, key: string, activation: Activation): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  const host = validateText(activation.host, "host");
  const domain = validateText(activation.domain, "domain");
  if (activation.mode !== "rw" && activation.mode !== "ro") throw invalid("bad_mode", `activation mode must be rw or ro`);
  transact(conn, () => {
    const volume = requireVolume(conn, key);
    if (volume.top_layer === null) throw invalid("no_data", `volume ${key} has no data (data destroyed)`);
    const existing = statement(conn, "SELECT host, domain, mode FROM activations WHERE volume = ?").all(volume.id) as unknown as Activation[];
    const same = existing.find((row) => row.host === host && row.domain === domain);
    if (same?.mode === activation.mode) return;
    const others = existing.filter((row) => row !== same);
    if (activation.mode === "rw") {
      const remote = others.find((row) => row.host !== host);
      if (remote) {
        if (remote.mode === "rw") throw activatedElsewhere(remote.host, key);
        throw invalid("activated_read_only", `volume ${key} is activated read-only on host ${remote.host}; deactivate it first`);
      }
      if (others.some((row) => row.mode === "ro") || same) {
        throw invalid("activated_read_only", `volume ${key} is activated read-only; deactivate it first`);
      }
      cancelMergesOf(conn, volume.top_layer);
    } else {
      const writer = others.find((row) => row.mode === "rw") ?? (same?.mode === "rw" ? same : undefined);
      if (writer) {
        if (writer.host !== host) throw activatedElsewhere(writer.host, key);
        throw invalid("activated_read_write", `volume ${key} is activated read-write; deactivate it first`);
      }
    }
    statement(conn, "INSERT INTO activations (volume, host, domain, mode) VALUES (?, ?, ?, ?)").run(volume.id, host, domain, activation.mode);
  });
}

/** Forgets the activation of `host` + `domain` (idempotent, also for a volume that no longer exists). */
export async function clearActivation(srPath: string, key: string, target: { host: string; domain: string }): Promise<void> {
  const conn = connectSr(srPath, { attached: true });
  transact(conn, () => {
    statement(
      conn,
      "DELETE FROM activations WHERE volume = (SELECT id FROM volumes WHERE key = ?) AND host = ? AND domain = ?",
    ).run(validateKey(key), target.host, target.domain);
  });
}

export async function listActivations(srPath: string, key: string): Promise<Activation[]> {
  const conn = connectSr(srPath, { attached: true });
  const volume = requireVolume(conn, key);
  const rows = statement(conn, "SELECT host, domain, mode FROM activations WHERE volume = ? ORDER BY host, domain").all(volume.id) as unknown as Activation[];
  return rows.map(({ host, domain, mode }) => ({ host, domain, mode }));
}
