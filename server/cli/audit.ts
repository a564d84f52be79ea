// `hangar audit`: the toolstack's audit trail (GET /audit_log), as xapi's audit.log lines or checked: --verify
// reads the rows whole and recomputes the hash chain here, so an edited or removed row is found by the reader,
// not taken on the service's word.
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { type AuditRow, verifyChain, ZAuditRow } from "../xenapi/audit-log.ts";
import { withClient } from "./connection.ts";
import { parseCommandLine, UsageError } from "./usage.ts";

export const summary = "print the audit trail, or check that no row of it was edited or removed";

export const help = `Usage: hangar audit [--since WHEN] [--verify] [--url URL] [--user NAME]

Prints the toolstack's audit trail (GET /audit_log), a line per call or HTTP action that changed state,
allowed or denied, and per login, as xapi's audit.log writes them: oldest first, from WHEN on (ISO 8601,
e.g. 2026-12-01 or 2026-12-01T08:00:00Z).

  --verify     read every row kept and check the hash chain that links them: each row's hash and that it
               follows the row before. Exit status 0 when the chain holds, 1 (naming the row) when a row was
               changed or removed. Print the head hash it ends on, to compare with one kept elsewhere.
  --url URL    the toolstack (default: $HANGAR_URL or http://127.0.0.1:8080)
  --user NAME  user to log in as (default root; the read-only role is enough); password: $HANGAR_PASSWORD
`;


export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, { since: { type: "string" }, verify: { type: "boolean" }, url: { type: "string" }, user: { type: "string" } });
  if (positionals.length > 0) throw new UsageError(`unexpected ${positionals.join(" ")}`);
  return withClient(values, async (client) => {
    const query = new URLSearchParams({ session_id: client.session });
    if (values.since !== undefined) query.set("since", values.since);
    if (values.verify === true) query.set("format", "json");
    const response = await fetch(`${client.url.replace(/\/$/, "")}/audit_log?${query}`);
    if (!response.ok || response.body === null) throw new Error(`GET /audit_log answered ${response.status}: ${(await response.text()).trim()}`);
    const body = Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
    if (values.verify !== true) {
      for await (const chunk of body) process.stdout.write(chunk as Buffer);
      return 0;
    }
    const rows = async function* (): AsyncGenerator<AuditRow> {
      for await (const line of createInterface({ input: body, crlfDelay: Infinity })) if (line !== "") yield ZAuditRow.parse(JSON.parse(line));
    };
    const result = await verifyChain(rows());
    if (!result.ok) {
      process.stdout.write(`The audit trail is broken: ${result.reason}. ${result.rows} row(s) before it check out.\n`);
      return 1;
    }
    const span = result.first === undefined ? "no rows yet" : `${result.rows} row(s), ${result.first.time} to ${result.last!.time}; head ${result.last!.hash}`;
    process.stdout.write(`The audit trail verifies: ${span}.\n`);
    return 0;
  });
}
