// The configuration the suite creates its SR with: the user's --config, or a fresh directory for the
// configuration keys that name a place (path, uri, file-uri), as most file-based plugins declare.
import { pathToFileURL } from "node:url";
import type { Configuration } from "../storage/types.ts";

const DIRECTORY_KEYS: Record<string, (dir: string) => string> = {
  path: (dir) => dir,
  uri: (dir) => pathToFileURL(dir).href,
  "file-uri": (dir) => pathToFileURL(dir).href,
};

/** Parses repeated `key=value` options (the value may hold '='). */
export function parseConfigOptions(options: readonly string[]): Configuration {
  const configuration: Configuration = {};
  for (const option of options) {
    const at = option.indexOf("=");
    if (at <= 0) throw new Error(`--config expects key=value, got "${option}"`);
    configuration[option.slice(0, at)] = option.slice(at + 1);
  }
  return configuration;
}

/**
 * What to pass to SR.create. `declared` is the plugin's `configuration` (key → description); `dir` is an
 * empty directory the suite owns. Throws when the plugin needs keys only the user can supply.
 */
export function srConfiguration(declared: Configuration, given: Configuration | undefined, dir: string): Configuration {
  if (given !== undefined && Object.keys(given).length > 0) return given;
  const keys = Object.keys(declared);
  const filled = Object.fromEntries(keys.flatMap((key) => (key in DIRECTORY_KEYS ? [[key, DIRECTORY_KEYS[key]!(dir)]] : [])));
  if (keys.length > 0 && Object.keys(filled).length === 0) {
    throw new Error(`the plugin's SR configuration needs ${keys.join(", ")}: pass them with --config key=value`);
  }
  return filled;
}
