// A throwaway OpenLDAP directory for tests: Debian's slapd in a temp dir (its config, database, TLS certificate
// and key there), on free ports of 127.0.0.1 for ldap:// (StartTLS offered) and ldaps://, filled with `ldapadd`
// from LDIF, stopped and removed when the test ends.
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { generate } from "selfsigned";

const run = promisify(execFile);
export const SUFFIX = "dc=hangar,dc=test";
export const ADMIN_DN = `cn=admin,${SUFFIX}`;
const ADMIN_PASSWORD = "slapd-admin-secret";

export interface Slapd {
  /** ldap://127.0.0.1:<port> (StartTLS offered). */
  url: string;
  /** ldaps://127.0.0.1:<port>. */
  secureUrl: string;
  /** The certificate slapd serves (self-signed: the CA to trust). */
  cert: string;
  /** Adds entries written as LDIF, as the directory's administrator. */
  add(ldif: string): Promise<void>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export async function startSlapd(): Promise<Slapd> {
  const dir = mkdtempSync(join(tmpdir(), "hangar-slapd-"));
  mkdirSync(join(dir, "data"));
  const made = await generate([{ name: "commonName", value: "localhost" }], {
    keySize: 2048,
    extensions: [{ name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }] }],
  });
  writeFileSync(join(dir, "cert.pem"), made.cert);
  writeFileSync(join(dir, "key.pem"), made.private, { mode: 0o600 });
  const schemas = ["core", "cosine", "inetorgperson", "nis"].map((name) => `include /etc/ldap/schema/${name}.schema`).join("\n");
  writeFileSync(
    join(dir, "slapd.conf"),
    `${schemas}
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile ${join(dir, "slapd.pid")}
TLSCertificateFile ${join(dir, "cert.pem")}
TLSCertificateKeyFile ${join(dir, "key.pem")}
database mdb
maxsize 16777216
suffix "${SUFFIX}"
rootdn "${ADMIN_DN}"
rootpw ${ADMIN_PASSWORD}
directory ${join(dir, "data")}
access to attrs=userPassword by self write by anonymous auth by * none
access to * by users read by * none
`,
  );
  const [plain, secure] = [await freePort(), await freePort()];
  const url = `ldap://127.0.0.1:${plain}`;
  const secureUrl = `ldaps://127.0.0.1:${secure}`;
  const child: ChildProcess = spawn("slapd", ["-f", join(dir, "slapd.conf"), "-h", `${url}/ ${secureUrl}/`, "-d", "0"], { stdio: ["ignore", "ignore", "pipe"] });
  let errors = "";
  child.stderr!.on("data", (chunk: Buffer) => (errors += chunk.toString()));
  const add = async (ldif: string) => {
    const file = join(dir, `add-${Date.now()}-${Math.random()}.ldif`);
    writeFileSync(file, ldif);
    await run("ldapadd", ["-x", "-H", url, "-D", ADMIN_DN, "-w", ADMIN_PASSWORD, "-f", file]);
  };
  for (let tries = 0; ; tries++) {
    try {
      await add(`dn: ${SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: hangar\no: Hangar tests\n`);
      break;
    } catch (error) {
      if (tries > 100 || child.exitCode !== null) {
        child.kill("SIGKILL");
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`slapd did not start: ${errors || (error as Error).message}`);
      }
      await sleep(100);
    }
  }
  return {
    url,
    secureUrl,
    cert: made.cert,
    add,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await Promise.race([new Promise((resolve) => child.once("exit", resolve)), sleep(5000)]);
        child.kill("SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
