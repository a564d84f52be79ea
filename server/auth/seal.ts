// Sealing for the console's session cookie: AES-256-GCM with a key only the console holds, so the browser
// carries an opaque, tamper-evident token and the console needs no session table (a restart logs nobody out).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { join } from "node:path";
import { dataDir, readOrCreateFile } from "../config.ts";

const IV_BYTES = 12;
const TAG_BYTES = 16;

let cachedKey: { source: string; key: Buffer } | undefined;

/** HANGAR_CONSOLE_SECRET (any string), else 32 random bytes kept in `<data dir>/console-secret` (mode 0600). */
export function sealingKey(): Buffer {
  const given = process.env.HANGAR_CONSOLE_SECRET;
  const source = given ? `env:${given}` : `file:${join(dataDir(), "console-secret")}`;
  if (cachedKey?.source === source) return cachedKey.key;
  const key = given ? createHash("sha256").update(given).digest() : readOrCreateSecret(source.slice(5));
  cachedKey = { source, key };
  return key;
}

/** The key in `file`, made (32 random bytes, base64, mode 0600) if there is none yet. */
function readOrCreateSecret(file: string): Buffer {
  const key = Buffer.from(readOrCreateFile(file, () => `${randomBytes(32).toString("base64")}\n`, 0o600).trim(), "base64");
  if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key: remove it to have a new one made`);
  return key;
}

/** `value` as JSON, encrypted and authenticated: base64url(iv | ciphertext | tag). */
export function seal(value: unknown, key: Buffer = sealingKey()): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  const body = Buffer.concat([cipher.update(JSON.stringify(value), "utf8"), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url");
}

/** What `seal` sealed with the same key; undefined for anything else (tampered, another key, garbage). */
export function unseal(token: string, key: Buffer = sealingKey()): unknown {
  const raw = Buffer.from(token, "base64url");
  if (raw.length < IV_BYTES + TAG_BYTES + 1) return undefined;
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, IV_BYTES));
    decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
    const text = Buffer.concat([decipher.update(raw.subarray(IV_BYTES, raw.length - TAG_BYTES)), decipher.final()]).toString("utf8");
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
